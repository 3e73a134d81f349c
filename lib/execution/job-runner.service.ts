import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { type ClaimedJob, JobClaimService } from '../claim/job-claim.service';
import { JobHandlerRegistry } from '../discovery/job-handler.registry';
import { WorkerShutdownError } from '../errors/worker-shutdown.error';
import { JobEvents } from '../events/job-events';
import { JOBS_LOGGER_CONTEXT, JOBS_RESOLVED_OPTIONS } from '../jobs.constants';
import type { ResolvedJobsOptions } from '../jobs.options';
import { LeaseHeartbeat } from '../lease/lease-heartbeat.service';
import { now } from '../utils/clock';
import { retryWithDelays } from '../utils/retry';
import { JobExecution } from './job-execution';
import { JobFinalizer } from './job-finalizer.service';
import { Wakeup } from './wakeup';

/** Waits between finalize attempts; all of it stays well inside any sane lease. */
const FINALIZE_RETRY_DELAYS_MS = [50, 250, 1000] as const;

interface RunningExecution {
  execution: JobExecution;
  done: Promise<void>;
}

/**
 * The worker: one poll loop with `concurrency` slots. A claim re-polls at once while a slot is free,
 * an empty poll sleeps `pollIntervalMs` (cut short by a local enqueue or a freed slot), and every
 * claim/finalize error is logged without stopping the loop.
 */
@Injectable()
export class JobRunner implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);
  private readonly running = new Map<string, RunningExecution>();
  private readonly runningPerName = new Map<string, number>();
  private readonly wakeup = new Wakeup();
  private loop?: Promise<void>;
  private stopping = false;
  private shutdownDone?: Promise<void>;
  private lastPollAt: Date | null = null;
  private lastError: string | null = null;

  constructor(
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
    private readonly registry: JobHandlerRegistry,
    private readonly claims: JobClaimService,
    private readonly heartbeat: LeaseHeartbeat,
    private readonly finalizer: JobFinalizer,
    private readonly events: JobEvents,
  ) {}

  onApplicationBootstrap(): void {
    if (this.options.worker && !this.loop) {
      this.logger.log(`Worker ${this.options.workerId} started (concurrency ${this.options.concurrency})`);
      this.loop = this.pollLoop();
    }
  }

  /** Stop claiming, let running handlers finish within `shutdownGraceMs`, then abort and release the rest. */
  beforeApplicationShutdown(): Promise<void> {
    this.shutdownDone ??= this.shutdown();
    return this.shutdownDone;
  }

  /** A job was enqueued in this process: an idle loop polls at once instead of waiting out its interval. */
  notifyEnqueued(): void {
    this.wakeup.wake();
  }

  /** Aborts this process's execution of a job, if any. */
  abortLocal(jobId: string, reason: Error): void {
    this.running.get(jobId)?.execution.abort(reason);
  }

  /** Poll-loop facts for health checks. `polling` is false before bootstrap, after shutdown, or with `worker: false`. */
  pollState(): { polling: boolean; running: number; lastPollAt: Date | null; lastError: string | null } {
    return {
      polling: this.loop !== undefined && !this.stopping,
      running: this.running.size,
      lastPollAt: this.lastPollAt,
      lastError: this.lastError,
    };
  }

  /** Runs a claimed job to its end in this process and writes its result (poll loop and `runNow`). */
  execute(claim: ClaimedJob): Promise<void> {
    const jobId = claim.doc._id.toHexString();
    const handler = this.registry.get(claim.doc.name);
    if (!handler) {
      return this.finalizer.failUnhandled(claim).catch((error) => this.logError(`Marking job ${jobId} failed`, error));
    }
    const execution = new JobExecution(claim, handler);
    const about = { jobId, name: claim.doc.name, attempt: execution.context.attempt };
    const lease = this.heartbeat.open(claim, handler, {
      onStale: (error) => {
        this.events.emit('stale', about, error.message);
        execution.abort(error);
      },
      onRenewed: () => this.events.emit('renewed', about),
    });
    this.adjustRunning(claim.doc.name, +1);
    const done = execution
      .run(lease, () => this.events.emit('started', about))
      // A transient database error must not turn a finished job into a reclaimed (re-run, attempt-counted) one.
      .then((outcome) => retryWithDelays(() => this.finalizer.finalize(execution, outcome), FINALIZE_RETRY_DELAYS_MS))
      .catch((error) => this.logError(`Finalizing job ${jobId}`, error))
      .finally(() => {
        this.running.delete(jobId);
        this.adjustRunning(claim.doc.name, -1);
        this.wakeup.wake();
      });
    this.running.set(jobId, { execution, done });
    return done;
  }

  private async pollLoop(): Promise<void> {
    while (!this.stopping) {
      if (this.running.size >= this.options.concurrency) {
        this.lastPollAt = now(); // all slots busy is "on schedule" too
        await this.wakeup.sleep(this.options.pollIntervalMs);
        continue;
      }
      let claim: ClaimedJob | null;
      try {
        claim = await this.claims.claimNext(this.saturatedNames());
      } catch (error) {
        this.lastPollAt = now();
        this.logError('Claiming a job', error);
        await this.wakeup.sleep(this.options.pollIntervalMs);
        continue;
      }
      this.lastPollAt = now();
      if (!claim) {
        await this.wakeup.sleep(this.options.pollIntervalMs);
      } else if (this.stopping) {
        // Shutdown began while this claim was in flight: hand it straight back rather than strand it.
        await this.finalizer.releaseUnstarted(claim).catch((error) => this.logError('Releasing a claim', error));
      } else {
        void this.execute(claim);
      }
    }
  }

  private async shutdown(): Promise<void> {
    this.stopping = true;
    this.wakeup.wake();
    await this.loop;
    if (this.running.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, this.options.shutdownGraceMs);
      });
      await Promise.race([Promise.all([...this.running.values()].map((entry) => entry.done)), grace]);
      clearTimeout(timer);
      for (const [jobId, entry] of this.running) entry.execution.abort(new WorkerShutdownError(jobId));
      await Promise.all([...this.running.values()].map((entry) => entry.done));
    }
    this.logger.log(`Worker ${this.options.workerId} stopped`);
  }

  private saturatedNames(): string[] {
    const names: string[] = [];
    for (const [name, count] of this.runningPerName) {
      const limit = this.registry.get(name)?.concurrency ?? Number.POSITIVE_INFINITY;
      if (count >= limit) names.push(name);
    }
    return names;
  }

  private adjustRunning(name: string, delta: number): void {
    const count = (this.runningPerName.get(name) ?? 0) + delta;
    if (count > 0) this.runningPerName.set(name, count);
    else this.runningPerName.delete(name);
  }

  private logError(what: string, error: unknown): void {
    const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
    this.lastError = `${what} failed: ${error instanceof Error ? error.message : String(error)}`;
    this.logger.error(`${what} failed: ${detail}`);
  }
}
