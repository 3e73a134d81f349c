import { Injectable, Logger } from '@nestjs/common';
import type { Types } from 'mongoose';
import type { ClaimedRow } from '../model/claimed-job.js';
import { errorInfo } from '../model/error-info.js';
import { firstAnswer, type HedgeSchedule } from '../model/first-answer.js';
import { JOBS_LOGGER_CONTEXT } from '../model/jobs.constants.js';
import { ShutdownDeadline } from '../model/shutdown-deadline.js';
import { mayHaveLanded } from '../persistence/database-errors.js';
import { JobClaimStore } from '../persistence/job-claim.store.js';

/**
 * How a claim in doubt is read back and handed back: a copy that fails is retried after 50 ms, doubling up to 1 s; one
 * not answered within 250 ms (then 500 ms, 1 s…) gets another copy beside it on another connection, at most 3 at once,
 * so a read stuck on a connection a partition hung does not hold the claim in doubt until its lease ends (the long
 * checker's seed 224: a lost claim answer, then 840 ms of black hole). Also the schedule of the dead-letter write of
 * a reclaim on a job's last attempt (`JobClaimService`).
 */
export const IN_DOUBT: HedgeSchedule = { hedgeMs: 250, maxInFlight: 3, retry: { baseMs: 50, maxMs: 1_000 } };
/** How long past the lease a claim wrote its row may still be handed back (bounded: the poll loop waits for it). */
export const HAND_BACK_WINDOW_MS = 2_000;

/**
 * Until when (epoch ms) the owner-fenced write that gives up a claim nobody runs (a hand-back, a last attempt's
 * dead-letter) is sent again through errors: the hand-back window past the claim's lease, or past now when that lease
 * is over already (a late answer). Fixed when called: a bound read again at each step would move with the clock once
 * the lease is over.
 */
export function handBackUntil(lockedUntil: Date | undefined): number {
  return Math.max(lockedUntil?.getTime() ?? 0, Date.now()) + HAND_BACK_WINDOW_MS;
}

/** What a claim sent: its lock id and the deadline it wrote (the row is found by both). */
export interface SentClaim {
  lockId: string;
  lockedUntil: Date;
}

/**
 * Resolves claims whose answer never came. A claim is one `findOneAndUpdate`: when its answer is lost (the connection
 * dropped after the server applied it) the row is `running` under a lock id only this worker knows. Left alone, it is
 * reclaimed once its lease runs out, with a `LeaseExpired` attempt counted against a job that never started (with
 * `maxAttempts: 1`, dead-lettered unrun). The claiming worker remembers what it sent, so it reads the row back by
 * `{ status: 'running', lockedBy, lockedUntil }`, retrying through errors while that lease may still be live, and
 * the caller runs (or, shutting down, hands back) what it finds. When the read cannot be answered before that lease
 * ends, the worker hands the row back itself, fenced by the same lock id and deadline, for a short while longer: a
 * reclaim writes another lock id, so at most one of the two takes effect, and a job that never started is charged no
 * attempt. Until a claim is answered or resolved, its lock id is one of `unresolvedLocks()`, which this process's own
 * reclaims skip: a read-back answered after the lease must not find the row reclaimed, and charged, by its own worker.
 * Another worker cannot tell a lost answer from a crash, so a worker that dies first (or whose read-back and hand-back
 * both fail for the lease and the hand-back window) leaves the row to be reclaimed as before.
 */
@Injectable()
export class ClaimsInDoubt {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);
  /** Lock ids of claims sent and not yet answered or resolved. */
  private readonly unresolved = new Set<string>();

  constructor(
    private readonly claims: JobClaimStore,
    private readonly deadline: ShutdownDeadline,
  ) {}

  /**
   * Sends a claim; when it fails with an error after which it may have landed (see `mayHaveLanded`), reads its row
   * back. Resolves what the claim answered, or `asTaken(row)` for the row it took after all; rejects with the claim's
   * own error when it did not land, or when that could not be told before the lease it would have written ran out
   * (or shutdown's hard bound).
   */
  async send<T>(claim: SentClaim, write: () => Promise<T>, asTaken: (row: ClaimedRow) => T): Promise<T> {
    this.unresolved.add(claim.lockId);
    try {
      return await write();
    } catch (error) {
      if (!mayHaveLanded(error)) throw error;
      const found = await this.readBack(claim);
      if (found === 'unknown') await this.handBack(claim, error);
      else if (found !== null) return asTaken(found);
      throw error;
    } finally {
      this.unresolved.delete(claim.lockId);
    }
  }

  /**
   * Sends a batch claim (one command taking several rows, each for its own lock id of `claims`, all until
   * `lockedUntil`; `write` resolves how many rows it took) and reads back which: the read by id and lock id, whether the
   * command's answer came or was lost. Resolves the rows taken (maybe none); rejects with the command's error when it
   * failed without landing, or when the read-back could not be answered before the lease (or shutdown's hard bound),
   * after handing every row still under one of these locks back to `pending`. A read that finds fewer rows than the
   * command took (it should not happen; a read from a lagging secondary would) hands back the locks it did not find.
   */
  async sendBatch(
    claims: readonly { id: Types.ObjectId; lockId: string }[],
    lockedUntil: Date,
    write: () => Promise<number>,
  ): Promise<ClaimedRow[]> {
    const lockIds = claims.map((claim) => claim.lockId);
    for (const lockId of lockIds) this.unresolved.add(lockId);
    try {
      let failure: { error: unknown } | undefined;
      let matched: number | undefined;
      try {
        matched = await write();
      } catch (error) {
        if (!mayHaveLanded(error)) throw error;
        failure = { error };
      }
      if (matched === 0) return [];
      const giveUpAt = () => Math.min(lockedUntil.getTime(), this.shutdownEndsAt());
      const read = () => this.claims.findClaimedByAny(claims, lockedUntil, matched);
      const answer = await firstAnswer(read, giveUpAt, IN_DOUBT);
      if (!answer) {
        const cause = failure?.error ?? new Error('the rows a batch claim took could not be read back');
        await Promise.all(lockIds.map((lockId) => this.handBack({ lockId, lockedUntil }, cause)));
        throw cause;
      }
      const found = answer.value;
      if (matched !== undefined && found.length < matched) {
        const seen = new Set(found.map((row) => row.lockedBy));
        const cause = new Error(`a batch claim took ${matched} rows and read back ${found.length}`);
        await Promise.all(
          lockIds.filter((lockId) => !seen.has(lockId)).map((lockId) => this.handBack({ lockId, lockedUntil }, cause)),
        );
      }
      return found;
    } finally {
      for (const lockId of lockIds) this.unresolved.delete(lockId);
    }
  }

  /**
   * The lock ids of this process's claims still unanswered (in flight, or in doubt and being read back or handed
   * back). A reclaim here skips rows under them: such a row's lease may have run out only because its answer is late,
   * and its job never started. Empty almost always; at most the claims in flight plus those in doubt.
   */
  unresolvedLocks(): string[] {
    return this.unresolved.size === 0 ? [] : [...this.unresolved];
  }

  /** The row the claim took, null when it took none, `'unknown'` when that could not be told before the lease ended. */
  private async readBack({ lockId, lockedUntil }: SentClaim): Promise<ClaimedRow | null | 'unknown'> {
    const giveUpAt = () => Math.min(lockedUntil.getTime(), this.shutdownEndsAt());
    const answer = await firstAnswer(() => this.claims.findClaimedBy(lockId, lockedUntil), giveUpAt, IN_DOUBT);
    return answer ? answer.value : 'unknown';
  }

  /** Past the lease: hands the row back if it is still this claim's, retrying through errors for a short while. */
  private async handBack({ lockId, lockedUntil }: SentClaim, cause: unknown): Promise<void> {
    const giveUpAt = () => Math.min(lockedUntil.getTime() + HAND_BACK_WINDOW_MS, this.shutdownEndsAt());
    // Idempotent: a second copy matches nothing once the first landed (it only decides what is logged).
    const write = () => this.claims.handBackClaimed(lockId, lockedUntil, new Date());
    const answer = await firstAnswer(write, giveUpAt, IN_DOUBT);
    if (answer?.value) {
      this.logger.warn(
        `A claim (lock ${lockId}) failed (${errorInfo(cause).message}) and took a row, found only after its lease; ` +
          'the row was handed back to pending, no attempt counted',
      );
    } else {
      // Both say "could not be read back before its lease ended": the fault checker accepts an attempt charged for
      // this lock on that evidence (a worker cut off from the database for its lease is, to the others, crashed).
      const after = answer
        ? 'and no row was left under it to hand back: it took none, or another worker reclaimed the row'
        : 'nor handed back after it: a row it took is reclaimed';
      this.logger.warn(
        `A claim (lock ${lockId}) failed (${errorInfo(cause).message}) and could not be read back before its lease ` +
          `ended, ${after} like a crashed worker's (a LeaseExpired attempt)`,
      );
    }
  }

  /** Shutting down, nothing waits past close()'s hard bound. */
  private shutdownEndsAt(): number {
    return this.deadline.endsAt ?? Number.POSITIVE_INFINITY;
  }
}
