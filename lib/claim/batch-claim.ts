import type { Logger } from '@nestjs/common';
import type { Types } from 'mongoose';
import type { ClaimedJob } from '../model/claimed-job.js';
import { addMs, now } from '../model/clock.js';
import { MAX_CLAIM_BATCH_SIZE } from '../model/jobs.constants.js';
import type { JobClaimStore } from '../persistence/job-claim.store.js';
import type { ClaimsInDoubt } from './claims-in-doubt.js';
import type { LockIdSequence } from './lock-id.js';

export interface BatchClaimDeps {
  claims: JobClaimStore;
  inDoubt: ClaimsInDoubt;
  lockIds: LockIdSequence;
  logger: Logger;
  leaseMs: number;
  pollIntervalMs: number;
  /** The rows set aside in this process (refused by the server), which no claim takes. */
  skipIds: () => readonly Types.ObjectId[];
}

/**
 * Claims several due jobs in three commands instead of one `findOneAndUpdate` each: the first `want` due rows in claim
 * order (priority, `runAt`, `_id`); one unordered bulk that takes each still due for its own lock id and fencing token;
 * one read of the rows under those lock ids, which is also how a batch whose answer was lost is resolved
 * (`ClaimsInDoubt.sendBatch`). Rows another worker took in between are simply not among them. Only names without
 * fleet-wide limits are batched: a limited name's claim takes its slots with the row, one at a time.
 */
export class BatchClaim {
  /** When the server last refused a row of a batch: single claims, which set such a row aside, until a poll later. */
  private refusedAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly deps: BatchClaimDeps) {}

  /**
   * Up to `want` due jobs of `names`, in claim order, and of each name no more than `roomOf(name)` (its room in this
   * process's `concurrency`: the rows after those are left for a later claim); an empty list when none is due. Null when a batch does not apply
   * now (a row was refused lately) or others took every candidate first: the caller claims one job instead.
   * Rejects as a claim does: the command failed without landing, or could not be resolved before its lease.
   */
  async take(names: string[], want: number, roomOf: (name: string) => number): Promise<ClaimedJob[] | null> {
    const { claims, inDoubt, lockIds, leaseMs, pollIntervalMs } = this.deps;
    if (Date.now() - this.refusedAt < pollIntervalMs) return null;
    const scope = { names, skipIds: this.deps.skipIds() };
    const candidates = await claims.peekDue(now(), scope, Math.min(want, MAX_CLAIM_BATCH_SIZE));
    if (candidates.length === 0) return [];
    const chosen = withinRoom(candidates, roomOf);
    const rows = chosen.map((candidate) => ({ id: candidate._id, lockId: lockIds.next() }));
    // Read after the candidates came back: the lease starts with the take, not with the read before it.
    const at = now();
    const lockedUntil = addMs(at, leaseMs);
    const taken = await inDoubt.sendBatch(rows, lockedUntil, async () => {
      const { matched, refused } = await claims.takeEach(rows, at, lockedUntil, scope);
      if (refused.size > 0) {
        this.refusedAt = Date.now();
        const [first] = refused.values();
        this.deps.logger.warn(
          `A batch claim was refused by the server for ${refused.size} row(s) (${first.message}); ` +
            'single claims, which set such rows aside, until the next poll',
        );
      }
      return matched;
    });
    // Others took every candidate first: more may be due behind them, which one claim finds.
    if (taken.length === 0) return null;
    return taken.map((doc) => ({ doc, lockId: doc.lockedBy as string }));
  }
}

/** The candidates in order, skipping those of a name once `roomOf(name)` of it were kept. */
function withinRoom<T extends { name: string }>(candidates: T[], roomOf: (name: string) => number): T[] {
  const left = new Map<string, number>();
  return candidates.filter((candidate) => {
    const room = left.get(candidate.name) ?? roomOf(candidate.name);
    left.set(candidate.name, room - 1);
    return room > 0;
  });
}
