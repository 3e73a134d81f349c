import type { Logger } from '@nestjs/common';
import { recordTakenOver } from '../claim/taken-over.js';
import type { JobFinalizer } from '../execution/job-finalizer.service.js';
import type { RowFate } from '../execution/row-fate.js';
import type { ClaimedJob } from '../model/claimed-job.js';
import type { JobEvents } from '../model/events/job-events.js';
import type { JobsTelemetry } from '../model/jobs-telemetry.js';
import type { ShutdownDeadline } from '../model/shutdown-deadline.js';

export interface UnstartedClaimsDeps {
  finalizer: JobFinalizer;
  events: JobEvents;
  telemetry: JobsTelemetry | null;
  logger: Logger;
  /** Logs a failed step (the runner's error log, which the worker state reports too). */
  logError: (what: string, error: unknown) => void;
}

/**
 * Claims this process took and will not start: handed back to `pending` (shutting down, at a limit, a name paused
 * meanwhile, no handler here) or set aside as `failed` (a row that cannot run as stored). Each write is tracked until
 * it settles, and shutdown waits for them (`settled`, up to its hard bound): a hand-back sent before shutdown and
 * retried through an error must not be cut off by `close()` returning, which left its row running until a reclaim
 * charged it an attempt that no handler ran (the long checker's seed 3806).
 */
export class UnstartedClaims {
  private readonly writes = new Set<Promise<unknown>>();
  /** Claims handed back during shutdown (they landed after it began): counted in its summary. */
  readonly shutdownHandBacks: { jobId: string; fate: RowFate }[] = [];

  constructor(private readonly deps: UnstartedClaimsDeps) {}

  /**
   * Hands a claim back to `pending`. False: its lease ran out (a late answer) and another worker reclaimed it with a
   * `LeaseExpired` attempt: a lease lost like any other, recorded as one (`stale`, no handler call; the long
   * checker's seed 556). Undefined: no answer in time. `atShutdown`: the claim landed after shutdown began; its fate
   * goes in the shutdown summary.
   */
  handBack(claim: ClaimedJob, jobId: string, atShutdown: boolean): Promise<boolean | undefined> {
    return this.track(this.release(claim, jobId, atShutdown));
  }

  /** Sets aside a row that cannot run as stored (`failed`, with the reason); a failed write is logged. */
  setAside(claim: ClaimedJob, jobId: string, reason: string): Promise<void> {
    const write = this.deps.finalizer
      .setAside(claim, jobId, reason)
      .catch((error: unknown) => this.deps.logError(`Setting aside job ${jobId}`, error));
    return this.track(write);
  }

  /** Resolves when every write under way has settled, or at shutdown's hard bound. */
  settled(deadline: ShutdownDeadline): Promise<void> {
    return deadline.settledBy(Promise.allSettled([...this.writes]));
  }

  private async release(claim: ClaimedJob, jobId: string, atShutdown: boolean): Promise<boolean | undefined> {
    const { events, telemetry, logger } = this.deps;
    const released = await this.deps.finalizer.releaseUnstarted(claim);
    if (released === false) recordTakenOver(events, telemetry, claim, jobId);
    if (released === undefined) {
      // Said whether or not shutting down: a row left under this lock is reclaimed and charged an attempt no handler
      // ran, and this line is the record of why (long seed 4400: a claim for a name paused meanwhile, its hand-back
      // unanswered through an outage, gave up without a word).
      logger.warn(
        `Job ${jobId}: handing back a claim${atShutdown ? ' at shutdown' : ''} (lock ${claim.lockId}) got no answer ` +
          'in time (or was refused for the document); the row is reclaimed once its lease has run out, like a ' +
          "crashed worker's (a LeaseExpired attempt)",
      );
    }
    if (atShutdown) {
      this.shutdownHandBacks.push({
        jobId,
        fate: released === undefined ? 'left' : released ? 'released' : 'not_ours',
      });
    }
    return released;
  }

  private async track<T>(write: Promise<T>): Promise<T> {
    this.writes.add(write);
    try {
      return await write;
    } finally {
      this.writes.delete(write);
    }
  }
}
