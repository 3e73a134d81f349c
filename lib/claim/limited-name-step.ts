import type { Logger } from '@nestjs/common';
import type { FleetLimits } from '../handlers/fleet-limits.js';
import type { ClaimedJob } from '../model/claimed-job.js';
import { addMs, now } from '../model/clock.js';
import type { ShutdownDeadline } from '../model/shutdown-deadline.js';
import type { ByIdScope, ClaimSource } from '../persistence/claim-queries.js';
import type { ClaimSkips } from './claim-skips.js';
import type { ClaimsInDoubt } from './claims-in-doubt.js';
import type { LastAttempts } from './last-attempts.js';
import type { LimitedClaim, LimitedTakeResult } from './limited-claim.js';
import type { LockIdSequence } from './lock-id.js';
import type { RefusedRows } from './refused-rows.js';

/** A limited name's claim sources: expired leases first when a search for them is due, else due rows only. */
const RECLAIM_FIRST: readonly ClaimSource[] = ['running', 'pending'];
const PENDING_ONLY: readonly ClaimSource[] = ['pending'];
/** Tries of one limited name's claim that another claimer beat to a slot or row, before the claim gives up. */
const LIMITED_CLAIM_TRIES = 3;

/** What `LimitedNameStep` needs of the claim service that owns it. */
export interface LimitedNameStepContext {
  limitedClaim: LimitedClaim;
  inDoubt: ClaimsInDoubt;
  refused: RefusedRows;
  lockIds: LockIdSequence;
  skips: ClaimSkips;
  lastAttempts: LastAttempts;
  deadline: ShutdownDeadline;
  logger: Logger;
  leaseMs: number;
  /** What a claim of `names` from `source` may take (a reclaim skips this process's unresolved claims). */
  byIdScope(source: ClaimSource, names: string[]): ByIdScope;
}

/**
 * One claim of a name with fleet-wide limits (`LimitedClaim`): its expired leases at most once per poll interval,
 * then a due row. A name found at its limit is skipped until the next poll interval or until one of its executions
 * here ends. A row the server refuses to take (confirmed on exactly that row, with its slots) is set aside as
 * `failed`, like a refused row of any name; a refusal that names no row is logged and the name skipped likewise.
 */
export class LimitedNameStep {
  constructor(private readonly context: LimitedNameStepContext) {}

  async claim(name: string, limits: FleetLimits): Promise<ClaimedJob | null> {
    const { skips, deadline } = this.context;
    if (skips.isSkipped(name)) return null;
    const arrivals = skips.arrivals;
    for (const source of skips.startReclaimSearch(name) ? RECLAIM_FIRST : PENDING_ONLY) {
      for (let contended = 0; contended < LIMITED_CLAIM_TRIES; ) {
        if (deadline.started) return null; // after the reclaim search or a contended try: nothing more is sent
        const lockId = this.context.lockIds.next();
        const result = await this.take(name, limits, source, lockId);
        if (result.kind === 'refused_unplaced') {
          const { message } = result.refusal.error;
          this.context.logger.error(
            `Claiming a job of "${name}" was refused by the server: ${message}; skipping it this poll`,
          );
          skips.markFull(name);
          return null;
        }
        if (result.kind === 'taken') {
          const claim = { doc: result.doc, lockId };
          if (result.reclaimed) skips.reclaimFound(name);
          if (!result.reclaimed || (await this.context.lastAttempts.keepReclaimed(claim, now()))) return claim;
        } else if (result.kind === 'refused') {
          // Set aside like a refused row of any name (it leaves `running`/`pending` for `failed`, slots unset).
          await this.context.refused.setAsideRefused(result.source, { _id: result.id, name }, result.refusal);
          contended += 1;
        } else if (result.kind === 'full') {
          skips.markFull(name);
          return null;
        } else if (result.kind === 'none') break;
        else contended += 1;
      }
    }
    skips.markEmpty(name, arrivals);
    return null;
  }

  /** One try, sent as a claim in doubt: a lost answer is read back by its lock id. */
  private take(name: string, limits: FleetLimits, source: ClaimSource, lockId: string): Promise<LimitedTakeResult> {
    const { limitedClaim, inDoubt, refused, deadline, leaseMs } = this.context;
    const at = now();
    const lockedUntil = addMs(at, leaseMs);
    return inDoubt.send(
      { lockId, lockedUntil },
      () =>
        limitedClaim.take({
          name,
          limits,
          source,
          at,
          lockId,
          lockedUntil,
          skipIds: refused.skipIds(),
          skipLocks: this.context.byIdScope(source, [name]).skipLocks,
          stopped: () => deadline.started,
        }),
      (doc): LimitedTakeResult => ({ kind: 'taken', doc, reclaimed: source === 'running' }),
    );
  }
}
