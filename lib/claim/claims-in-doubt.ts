import { Injectable, Logger } from '@nestjs/common';
import { JOBS_LOGGER_CONTEXT } from '../jobs.constants.js';
import { mayHaveLanded } from '../persistence/database-errors.js';
import type { JobDocument } from '../persistence/job.schema.js';
import { JobClaimStore } from '../persistence/job-claim.store.js';
import { ShutdownDeadline } from '../shutdown/shutdown-deadline.js';
import { errorInfo } from '../utils/error-info.js';
import { raceTimeout } from '../utils/race-timeout.js';

/** Waits between reads of a claim in doubt: 50 ms doubling, at most 1 s. */
const READ_RETRY_BASE_MS = 50;
const READ_RETRY_MAX_MS = 1_000;
/** How long past the lease a claim wrote its row may still be handed back (bounded: the poll loop waits for it). */
const HAND_BACK_WINDOW_MS = 2_000;

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
  async send<T>(claim: SentClaim, write: () => Promise<T>, asTaken: (row: JobDocument) => T): Promise<T> {
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
   * The lock ids of this process's claims still unanswered (in flight, or in doubt and being read back or handed
   * back). A reclaim here skips rows under them: such a row's lease may have run out only because its answer is late,
   * and its job never started. Empty almost always; at most the claims in flight plus those in doubt.
   */
  unresolvedLocks(): string[] {
    return this.unresolved.size === 0 ? [] : [...this.unresolved];
  }

  /** The row the claim took, null when it took none, `'unknown'` when that could not be told before the lease ended. */
  private async readBack({ lockId, lockedUntil }: SentClaim): Promise<JobDocument | null | 'unknown'> {
    const giveUpAt = () => Math.min(lockedUntil.getTime(), this.shutdownEndsAt());
    for (let failures = 0; ; failures += 1) {
      try {
        // A read that hangs (server unreachable) is not waited for past the point where its answer is of no use.
        const read = this.claims.findClaimedBy(lockId, lockedUntil).then((row) => ({ row }));
        const answer = await raceTimeout(read, giveUpAt() - Date.now(), () => undefined);
        return answer ? answer.row : 'unknown';
      } catch {
        if (!(await this.backOff(failures, giveUpAt()))) return 'unknown';
      }
    }
  }

  /** Past the lease: hands the row back if it is still this claim's, retrying through errors for a short while. */
  private async handBack({ lockId, lockedUntil }: SentClaim, cause: unknown): Promise<void> {
    const giveUpAt = () => Math.min(lockedUntil.getTime() + HAND_BACK_WINDOW_MS, this.shutdownEndsAt());
    for (let failures = 0; ; failures += 1) {
      try {
        const write = this.claims.handBackClaimed(lockId, lockedUntil, new Date());
        const handedBack = await raceTimeout(write, giveUpAt() - Date.now(), () => undefined);
        if (handedBack === undefined) break;
        if (handedBack) {
          this.logger.warn(
            `A claim (lock ${lockId}) failed (${errorInfo(cause).message}) and took a row, found only after its lease; ` +
              'the row was handed back to pending, no attempt counted',
          );
        }
        return; // handed back, or the claim took nothing (or its row was reclaimed already)
      } catch {
        if (!(await this.backOff(failures, giveUpAt()))) break;
      }
    }
    this.logger.warn(
      `A claim (lock ${lockId}) failed (${errorInfo(cause).message}) and neither reading its row back nor handing it ` +
        "back could be done in time; a row it took is reclaimed like a crashed worker's",
    );
  }

  /** Waits before the next try (50 ms doubling, at most 1 s); false when that would pass `giveUpAt`. */
  private async backOff(failures: number, giveUpAt: number): Promise<boolean> {
    const waitMs = Math.min(READ_RETRY_BASE_MS * 2 ** failures, READ_RETRY_MAX_MS);
    if (Date.now() + waitMs >= giveUpAt) return false;
    await new Promise((resolve) => setTimeout(resolve, waitMs));
    return true;
  }

  /** Shutting down, nothing waits past close()'s hard bound. */
  private shutdownEndsAt(): number {
    return this.deadline.endsAt ?? Number.POSITIVE_INFINITY;
  }
}
