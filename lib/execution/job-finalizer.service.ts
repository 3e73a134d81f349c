import { Injectable, Logger } from '@nestjs/common';
import type { ClaimedJob } from '../claim/job-claim.service';
import { UnrecoverableJobError } from '../errors/unrecoverable-job.error';
import { JobEvents } from '../events/job-events';
import { JOBS_LOGGER_CONTEXT } from '../jobs.constants';
import { JobsRepository } from '../persistence/jobs.repository';
import { backoffDelayMs } from '../utils/backoff';
import { addMs, now } from '../utils/clock';
import { errorInfo } from '../utils/error-info';
import type { ExecutionOutcome, JobExecution } from './job-execution';

/** Writes an execution's result, fenced by its lock: a stale owner's late result changes nothing. */
@Injectable()
export class JobFinalizer {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);

  constructor(
    private readonly repository: JobsRepository,
    private readonly events: JobEvents,
  ) {}

  async finalize(execution: JobExecution, outcome: ExecutionOutcome): Promise<void> {
    const { doc, lockId } = execution.claim;
    const at = now();
    const label = `Job ${execution.jobId} (${doc.name}) attempt ${execution.context.attempt}`;
    const about = { jobId: execution.jobId, name: doc.name, attempt: execution.context.attempt };
    switch (outcome.kind) {
      case 'succeeded': {
        const written = await this.repository.complete(doc._id, lockId, at);
        if (written) this.events.emit('completed', about);
        return this.report(label, 'completed', written);
      }
      case 'failed': {
        const { message, errorClass, stack } = errorInfo(outcome.error);
        const attempt = { at, error: message, errorClass, ...(stack === undefined ? {} : { stack }) };
        const attemptsAfter = doc.attemptCount + 1;
        const exhausted = outcome.error instanceof UnrecoverableJobError || attemptsAfter >= doc.maxAttempts;
        const runAt = addMs(at, backoffDelayMs(attemptsAfter, execution.handler.backoff));
        const next = exhausted ? ({ status: 'dead' } as const) : ({ status: 'pending', runAt } as const);
        const written = await this.repository.recordFailure(doc._id, lockId, attempt, next);
        if (written) this.events.emit(exhausted ? 'dead' : 'retrying', about, message);
        this.logger.warn(
          `${label} failed (${errorClass}: ${message}); ${exhausted ? 'dead-lettered' : `retry at ${runAt.toISOString()}`}`,
        );
        return this.report(label, next.status, written);
      }
      case 'shutdown':
        return this.report(label, 'released', await this.repository.release(doc._id, lockId, at));
      case 'stale':
        this.logger.warn(`${label}: ${outcome.error.message}; its result is discarded`);
        return;
      case 'cancelled':
        this.logger.log(`${label} was cancelled`);
        return;
    }
  }

  /** A claimed row whose name no handler in this process knows: `failed`, so it is visible and the loop moves on. */
  async failUnhandled(claim: ClaimedJob): Promise<void> {
    const { doc, lockId } = claim;
    const reason = `No @JobHandler is registered for job "${doc.name}" in worker ${lockId.split('#')[0]}`;
    this.logger.warn(`Job ${doc._id.toHexString()}: ${reason}; marked failed`);
    if (await this.repository.markFailed(doc._id, lockId, reason, now())) {
      this.events.emit(
        'failed',
        { jobId: doc._id.toHexString(), name: doc.name, attempt: doc.attemptCount + 1 },
        reason,
      );
    }
  }

  /** A claim made as shutdown began, before anything ran: back to `pending`, nothing counted. */
  async releaseUnstarted(claim: ClaimedJob): Promise<void> {
    await this.repository.release(claim.doc._id, claim.lockId, now());
  }

  private report(label: string, transition: string, written: boolean): void {
    if (!written) {
      this.logger.warn(
        `${label}: not marked ${transition} because this worker no longer owns it (cancelled or taken over)`,
      );
    }
  }
}
