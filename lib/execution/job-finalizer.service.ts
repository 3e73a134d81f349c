import { Injectable, Logger } from '@nestjs/common';
import { handBackUntil } from '../claim/claims-in-doubt.js';
import { sendOwnedWrite } from '../claim/owned-write.js';
import { JobRetention } from '../handlers/job-retention.service.js';
import { backoffDelayMs } from '../model/backoff.js';
import type { ClaimedJob } from '../model/claimed-job.js';
import { addMs, now } from '../model/clock.js';
import { errorInfo } from '../model/error-info.js';
import { isUnrecoverable } from '../model/errors/unrecoverable-job.error.js';
import { JobEvents, type OutcomeSlot } from '../model/events/job-events.js';
import type { ExecutionOutcome } from '../model/execution-outcome.js';
import { JOBS_LOGGER_CONTEXT } from '../model/jobs.constants.js';
import { assertStorableResult } from '../model/result-validator.js';
import { ShutdownDeadline } from '../model/shutdown-deadline.js';
import { JobOutcomeStore } from '../persistence/job-outcome.store.js';
import type { JobExecution } from './job-execution.js';
import { type OutcomeWrite, persistOutcome } from './outcome-persistence.js';
import type { RowFate } from './row-fate.js';

/** Writes an execution's result, fenced by its lock: a stale owner's late result changes nothing. */
@Injectable()
export class JobFinalizer {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);

  constructor(
    private readonly outcomes: JobOutcomeStore,
    private readonly events: JobEvents,
    private readonly retention: JobRetention,
    private readonly deadline: ShutdownDeadline,
  ) {}

  /**
   * Writes the outcome while the execution still owns the row: transient database errors are retried (with
   * backoff) until the write lands, the lease is lost, or `deadline` (shutdown) passes; other errors the library does
   * not know (unfamiliar server codes included) for one lease, then the row is left to its lease. Only a write refused
   * for its document dead-letters the attempt with that reason instead, written without the part that was refused.
   * Resolves what became of the row, as far as this worker knows (a write in doubt counts as `left`).
   */
  async finalize(
    execution: JobExecution,
    settled: ExecutionOutcome,
    deadline?: () => number | undefined,
  ): Promise<RowFate> {
    // The ending event's place is kept from before its write is sent: once the row is pending again, this process may
    // claim and start it on another pooled connection before this write's answer arrives.
    const slot = this.events.reserveOutcome({
      jobId: execution.jobId,
      name: execution.claim.doc.name,
      attempt: execution.context.attempt,
    });
    let releasedLater = false;
    try {
      return await this.writeOutcome(execution, settled, deadline, slot, () => {
        releasedLater = true;
      });
    } finally {
      if (!releasedLater) slot.release();
    }
  }

  /** `finalize`'s write; `releaseLater` hands the release of `slot` to a write whose answer comes after this returns. */
  private async writeOutcome(
    execution: JobExecution,
    settled: ExecutionOutcome,
    deadline: (() => number | undefined) | undefined,
    slot: OutcomeSlot,
    releaseLater: () => void,
  ): Promise<RowFate> {
    const outcome = withStorableResult(execution, settled);
    const { doc, lockId } = execution.claim;
    const { lease } = execution;
    const at = now();
    const label = `Job ${execution.jobId} (${doc.name}) attempt ${execution.context.attempt}`;
    const budgetMs = execution.handler.leaseMs;
    const landed = () => this.outcomes.finishedBy(doc._id, lockId);
    const persist = (write: OutcomeWrite) => persistOutcome(write, lease, budgetMs, deadline, landed);
    // Taken once, after the renewal in flight settled (its lines landed or wait again): every try carries the same.
    const writes = outcome.kind === 'succeeded' || outcome.kind === 'failed' || outcome.kind === 'shutdown';
    const logs = writes ? await lease.takeLogsForOutcome() : undefined;
    let transition: string;
    let result: Awaited<ReturnType<typeof persist>>;
    let onWritten = (): void => undefined;
    switch (outcome.kind) {
      case 'succeeded': {
        transition = 'completed';
        const expiresAt = this.retention.expiresAt('completed', doc, at);
        result = await persist(() =>
          this.outcomes.complete(doc._id, lockId, at, {
            result: outcome.result,
            progress: execution.lastProgress,
            expiresAt,
            logs,
          }),
        );
        onWritten = () => slot.emit('completed');
        break;
      }
      case 'failed': {
        const { message, errorClass, stack } = errorInfo(outcome.error);
        const attempt = { at, error: message, errorClass, ...(stack === undefined ? {} : { stack }) };
        const attemptsAfter = doc.attemptCount + 1;
        const exhausted = isUnrecoverable(outcome.error) || attemptsAfter >= doc.maxAttempts;
        const runAt = addMs(at, backoffDelayMs(attemptsAfter, execution.handler.backoff));
        const next = exhausted
          ? ({ status: 'dead', expiresAt: this.retention.expiresAt('dead', doc, at) } as const)
          : ({ status: 'pending', runAt } as const);
        transition = next.status;
        this.logger.warn(
          `${label} failed (${errorClass}: ${message}); ${exhausted ? 'dead-lettered' : `retry at ${runAt.toISOString()}`}`,
        );
        result = await persist(() => this.outcomes.recordFailure(doc._id, lockId, attempt, next, logs));
        onWritten = () => slot.emit(exhausted ? 'dead' : 'retrying', message);
        break;
      }
      case 'shutdown':
        transition = 'released';
        result = await persist(() => this.outcomes.release(doc._id, lockId, at, logs));
        break;
      case 'stale':
        this.logger.warn(`${label}: ${outcome.error.message}; its result is discarded`);
        return 'not_ours';
      case 'cancelled':
        this.logger.log(`${label} was cancelled`);
        return 'finished';
      case 'not_started': {
        // The claim's answer came back after the lease it wrote, so no handler ran. While the row is still under this
        // lock nobody else has taken it, so it goes back to pending with no attempt counted (the owner fence makes a
        // late hand-back harmless); only when that fails is it left to a reclaim, which counts a LeaseExpired attempt.
        const handedBack = await this.releaseUnstarted(execution.claim);
        this.logger.warn(
          handedBack
            ? `${label} did not start: ${outcome.reason}; handed back to pending, no attempt counted`
            : handedBack === false
              ? `${label} did not start: ${outcome.reason}; another worker has reclaimed it`
              : `${label} did not start: ${outcome.reason}; the row is reclaimed once its lease has run out`,
        );
        return handedBack ? 'released' : handedBack === false ? 'not_ours' : 'left';
      }
      case 'abandoned':
        this.logger.warn(`${label} was abandoned after its lease ran out (${outcome.reason.message})`);
        return 'left';
    }
    if (result.kind !== 'written' && lease.isCancelled) {
      // The cancel won the race with this write: the row is cancelled (its write matched a running row, so no outcome
      // write can land after it), and that is all there is to say.
      this.logger.log(`${label} was cancelled`);
      return 'finished';
    }
    switch (result.kind) {
      case 'written':
        onWritten();
        return outcome.kind === 'shutdown' ? 'released' : 'finished';
      case 'not_owned':
        this.logger.warn(
          `${label}: not marked ${transition} because this worker no longer owns it (cancelled or taken over)`,
        );
        return 'not_ours';
      case 'gave_up': {
        const { why, late } = result;
        if (!late) {
          this.logger.warn(
            `${label}: could not be marked ${transition} (${why}); the row is reclaimed once its lease has run out`,
          );
          return 'left';
        }
        // The write was sent before the lease was lost: its answer, when it comes, says what the row is.
        this.logger.warn(`${label}: ${why} while being marked ${transition}; that write's answer decides`);
        releaseLater(); // a landed write's event keeps its place until that answer is handled
        void late.then((landed) => {
          if (landed) {
            this.logger.log(`${label}: marked ${transition} after all (the write landed while the row was still ours)`);
            onWritten();
          } else {
            this.logger.warn(
              `${label}: not marked ${transition} (the row was no longer this worker's, or the write failed); ` +
                'a row still running is reclaimed once its lease has run out',
            );
          }
          slot.release();
        });
        return 'left';
      }
      case 'refused':
        return this.deadLetterUnstorable(execution, transition, result.error, deadline, slot);
      case 'abandoned':
        lease.stopRenewing();
        this.logger.error(
          `${label}: could not be marked ${transition} (${errorInfo(result.error).message}); its lease is no longer ` +
            'renewed and the row is reclaimed once it runs out',
        );
        return 'left';
    }
  }

  /** A claimed row this worker cannot run as stored (malformed fields): `failed` with the reason, if writable. */
  async setAside(claim: ClaimedJob, jobId: string, reason: string): Promise<void> {
    this.logger.error(`Job ${jobId} cannot run as stored: ${reason}; marked failed`);
    const at = now();
    const expiresAt = this.retention.expiresAt('failed', claim.doc, at);
    if (await this.outcomes.markFailed(claim.doc._id, claim.lockId, `Cannot run as stored: ${reason}`, at, expiresAt)) {
      this.events.emit('failed', { jobId, name: String(claim.doc.name), attempt: 0 }, reason);
    }
  }

  /**
   * A claim this process will not start (shutting down, at its limit, no handler, answered after its lease): back to
   * `pending`, nothing counted. The hand-back is owner-fenced, so it is sent again through errors (hedged like a claim
   * in doubt; a copy whose answer was lost is recognised by `finishedBy`) until the hand-back window past the claim's
   * lease, or shutdown's hard bound: a row left under this lock would be reclaimed, and charged a `LeaseExpired`
   * attempt, for a claim that ran nothing (the long checker's seed 484: a late claim at shutdown whose hand-back was
   * refused once). Resolves true when the row went back, false when it was no longer under this lock (reclaimed),
   * undefined when no answer came in time or it was refused for good (the row is then reclaimed like a crashed
   * worker's). Never rejects.
   */
  releaseUnstarted(claim: ClaimedJob): Promise<boolean | undefined> {
    const { doc, lockId } = claim;
    return sendOwnedWrite(
      () => this.outcomes.release(doc._id, lockId, now()),
      () => this.outcomes.finishedBy(doc._id, lockId),
      handBackUntil(doc.lockedUntil),
      this.deadline,
    );
  }

  private async deadLetterUnstorable(
    execution: JobExecution,
    transition: string,
    refusal: unknown,
    deadline: (() => number | undefined) | undefined,
    slot: OutcomeSlot,
  ): Promise<RowFate> {
    const { doc, lockId } = execution.claim;
    const why = errorInfo(refusal).message;
    const reason = `The outcome (${transition}) could not be stored: ${why}`;
    this.logger.error(`Job ${execution.jobId} (${doc.name}): ${reason}; dead-lettered`);
    const at = now();
    const expiresAt = this.retention.expiresAt('dead', doc, at);
    const result = await persistOutcome(
      () => this.outcomes.deadLetterUnstorable(doc._id, lockId, reason, at, expiresAt),
      execution.lease,
      execution.handler.leaseMs,
      deadline,
      () => this.outcomes.finishedBy(doc._id, lockId),
    );
    if (result.kind === 'written') {
      slot.emit('dead', reason);
      return 'finished';
    }
    this.logger.error(`Job ${execution.jobId}: dead-lettering failed too (${result.kind}); left to its lease`);
    return 'left';
  }
}

/**
 * A success whose result MongoDB cannot store is a failed attempt, with an UnstorableResultError (unrecoverable:
 * dead at once), decided before anything is written so that no half of it is.
 */
function withStorableResult(execution: JobExecution, outcome: ExecutionOutcome): ExecutionOutcome {
  if (outcome.kind !== 'succeeded') return outcome;
  try {
    assertStorableResult(execution.jobId, outcome.result, execution.claim.doc);
    return outcome;
  } catch (error) {
    return { kind: 'failed', error };
  }
}
