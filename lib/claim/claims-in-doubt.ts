import { Injectable, Logger } from '@nestjs/common';
import { JOBS_LOGGER_CONTEXT } from '../jobs.constants';
import { mayHaveLanded } from '../persistence/database-errors';
import type { JobDocument } from '../persistence/job.schema';
import { JobsRepository } from '../persistence/jobs.repository';
import { ShutdownDeadline } from '../shutdown/shutdown-deadline';
import { errorInfo } from '../utils/error-info';
import { raceTimeout } from '../utils/race-timeout';

/** Waits between reads of a claim in doubt: 50 ms doubling, at most 1 s. */
const READ_RETRY_BASE_MS = 50;
const READ_RETRY_MAX_MS = 1_000;

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
 * the caller runs (or, shutting down, hands back) what it finds. Another worker cannot tell a lost answer from a
 * crash, so a worker that dies first leaves the row to be reclaimed as before.
 */
@Injectable()
export class ClaimsInDoubt {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);

  constructor(
    private readonly repository: JobsRepository,
    private readonly deadline: ShutdownDeadline,
  ) {}

  /**
   * Sends a claim; when it fails with an error after which it may have landed (see `mayHaveLanded`), reads its row
   * back. Resolves what the claim answered, or `asTaken(row)` for the row it took after all; rejects with the claim's
   * own error when it did not land, or when that could not be told before the lease it would have written ran out
   * (or shutdown's hard bound).
   */
  async send<T>(claim: SentClaim, write: () => Promise<T>, asTaken: (row: JobDocument) => T): Promise<T> {
    try {
      return await write();
    } catch (error) {
      if (!mayHaveLanded(error)) throw error;
      const landed = await this.readBack(claim, error);
      if (landed) return asTaken(landed);
      throw error;
    }
  }

  /** The row the claim took, or null when it took none or that could not be told in time. */
  private async readBack({ lockId, lockedUntil }: SentClaim, cause: unknown): Promise<JobDocument | null> {
    const giveUp = (why: unknown): null => {
      this.logger.warn(
        `A claim (lock ${lockId}) failed (${errorInfo(cause).message}) and reading its row back failed until its ` +
          `lease ran out (${errorInfo(why).message}); a row it took is reclaimed like a crashed worker's`,
      );
      return null;
    };
    for (let failures = 0; ; failures += 1) {
      const giveUpAt = this.giveUpAt(lockedUntil);
      try {
        // A read that hangs (server unreachable) is not waited for past the point where its answer is of no use.
        const read = this.repository.findClaimedBy(lockId, lockedUntil).then((row) => ({ row }));
        const answer = await raceTimeout(read, giveUpAt - Date.now(), () => undefined);
        return answer ? answer.row : giveUp(new Error('no answer'));
      } catch (error) {
        const waitMs = Math.min(READ_RETRY_BASE_MS * 2 ** failures, READ_RETRY_MAX_MS);
        if (Date.now() + waitMs >= giveUpAt) return giveUp(error);
        await new Promise((resolve) => setTimeout(resolve, waitMs));
      }
    }
  }

  /** Past the lease the claim wrote, the row is anyone's to reclaim; shutting down, past close()'s hard bound. */
  private giveUpAt(lockedUntil: Date): number {
    const shutdownEndsAt = this.deadline.endsAt;
    return Math.min(lockedUntil.getTime(), shutdownEndsAt ?? Number.POSITIVE_INFINITY);
  }
}
