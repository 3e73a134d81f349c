import type { Logger } from '@nestjs/common';
import { JobExecution } from '../execution/job-execution.js';
import type { JobFinalizer } from '../execution/job-finalizer.service.js';
import type { RegisteredJobHandler } from '../handlers/registered-job-handler.js';
import type { LeaseHeartbeat } from '../lease/lease-heartbeat.service.js';
import type { ClaimedJob } from '../model/claimed-job.js';
import type { JobEventSubject, JobEvents } from '../model/events/job-events.js';
import type { ExecutionOutcome } from '../model/execution-outcome.js';
import type { JobsTelemetry } from '../model/jobs-telemetry.js';
import type { ShutdownDeadline } from '../model/shutdown-deadline.js';
import { ignoredAbortMessage } from './ignored-abort-message.js';
import type { RunningExecution } from './running-execution.js';

/** What `ExecutionLauncher` needs of the worker that owns it. */
export interface ExecutionLauncherDeps {
  heartbeat: LeaseHeartbeat;
  finalizer: JobFinalizer;
  events: JobEvents;
  telemetry: JobsTelemetry | null;
  deadline: ShutdownDeadline;
  logger: Logger;
  logError(what: string, error: unknown): void;
}

/** How an execution holds its slot: taken before it starts, told when its handler settled, freed once it ended. */
export interface ExecutionSlot {
  taken(entry: RunningExecution): void;
  handlerSettled(entry: RunningExecution): void;
  freed(entry: RunningExecution): void;
}

/**
 * Starts one claimed job in a slot: opens its lease (a lost lease aborts the handler, a cancel seen at a renewal
 * cancels it, renewals and progress become events), runs the handler under it, writes the outcome while the lease is
 * still renewed, then closes the lease. Events and telemetry are told along the way.
 */
export class ExecutionLauncher {
  constructor(private readonly deps: ExecutionLauncherDeps) {}

  /** Resolves the outcome once it is written (or left to its lease); never rejects. */
  launch(
    claim: ClaimedJob,
    handler: RegisteredJobHandler,
    jobId: string,
    slot: ExecutionSlot,
  ): Promise<ExecutionOutcome> {
    const { events, telemetry } = this.deps;
    const { doc, lockId } = claim;
    const about = { jobId, name: doc.name, attempt: doc.attemptCount + 1 };
    const lease = this.deps.heartbeat.open(
      // lockedUntil is a Date: whyNotRunnable checked the row.
      {
        jobId: doc._id,
        jobHex: jobId,
        lockId,
        lockedUntil: doc.lockedUntil as Date,
        claimedAt: doc.startedAt,
        leaseMs: handler.leaseMs,
      },
      {
        onStale: (error) => {
          events.emit('stale', about, error.message);
          telemetry?.leaseLost(doc.name);
          execution.abort(error); // the lease starts only once the execution runs
        },
        // Cancelled elsewhere, seen at a renewal: a cancel, not a lost lease (the lease has ended already).
        onCancelled: (error) => execution.cancel(error),
        onRenewed: () => {
          events.emit('renewed', about);
          telemetry?.leaseRenewed(doc.name);
        },
        onProgress: (progress) => events.emit('progress', about, undefined, progress),
      },
    );
    const execution = new JobExecution(claim, handler, jobId, lease);
    const entry: RunningExecution = {
      execution,
      handlerSettled: false,
      done: Promise.resolve({ kind: 'succeeded', result: undefined }),
    };
    slot.taken(entry);
    const attempt = telemetry?.startAttempt(doc, jobId, about.attempt);
    if (attempt) execution.onAbort = attempt.aborted;
    const run = attempt ? attempt.run(() => this.runToEnd(entry, about, slot)) : this.runToEnd(entry, about, slot);
    entry.done = run.finally(() => slot.freed(entry));
    return entry.done;
  }

  /** Handler, then outcome write, under one lease that is renewed until the write has landed. */
  private async runToEnd(
    entry: RunningExecution,
    about: JobEventSubject,
    slot: ExecutionSlot,
  ): Promise<ExecutionOutcome> {
    const { execution } = entry;
    const { lease } = execution;
    const { events, logger } = this.deps;
    let outcome: ExecutionOutcome;
    try {
      outcome = await execution.run({
        onStarted: () => events.emit('started', about),
        onIgnoredAbort: (reason) => logger.warn(ignoredAbortMessage(about, execution.settleMs, reason, lease)),
      });
    } catch (error) {
      // Not expected (run settles every handler outcome itself); the lease is left to run out, as after a crash.
      this.deps.logError(`Running job ${about.jobId}`, error);
      entry.fate = 'left';
      lease.close();
      return { kind: 'abandoned', reason: error instanceof Error ? error : new Error(String(error)) };
    }
    entry.handlerSettled = true; // only the outcome write is left
    slot.handlerSettled(entry);
    try {
      entry.fate = await this.deps.finalizer.finalize(execution, outcome, () => this.deps.deadline.endsAt);
    } catch (error) {
      this.deps.logError(`Finalizing job ${about.jobId}`, error);
      entry.fate = 'left';
    } finally {
      lease.close();
    }
    return outcome;
  }
}
