import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { JobClaimService } from '../claim/job-claim.service.js';
import { PausedNames } from '../claim/paused-names.js';
import { whyNotRunnable } from '../claim/runnable-row.js';
import { WorkArrived } from '../enqueue/work-arrived.js';
import { JobFinalizer } from '../execution/job-finalizer.service.js';
import { JobHandlerRegistry } from '../handlers/job-handler.registry.js';
import type { RegisteredJobHandler } from '../handlers/registered-job-handler.js';
import { LeaseHeartbeat } from '../lease/lease-heartbeat.service.js';
import type { ClaimedJob } from '../model/claimed-job.js';
import { errorInfo } from '../model/error-info.js';
import type { JobCancelledError } from '../model/errors/job-cancelled.error.js';
import { JobEvents } from '../model/events/job-events.js';
import type { ExecutionOutcome } from '../model/execution-outcome.js';
import { describeJobId } from '../model/job-id.js';
import { JOBS_LOGGER_CONTEXT, JOBS_RESOLVED_OPTIONS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { JOBS_TELEMETRY, type JobsTelemetry } from '../model/jobs-telemetry.js';
import { ShutdownDeadline } from '../model/shutdown-deadline.js';
import { type ClaimStepAnswer, claimBurst } from './claim-burst.js';
import { ExecutionLauncher, type ExecutionSlot } from './execution-launcher.js';
import { FinishingSlots } from './finishing-slots.js';
import { JobChangeFeed } from './job-change-feed.js';
import { NameCapacity } from './name-capacity.js';
import { PollPacing } from './poll-pacing.js';
import { PollRecord } from './poll-record.js';
import type { RunningExecution } from './running-execution.js';
import { shutDownSlots } from './shutdown-slots.js';
import { describeShutdown } from './shutdown-summary.js';
import { SlotReservation } from './slot-reservation.js';
import { UnstartedClaims } from './unstarted-claims.js';
import type { PollState, WorkerState } from './worker-state.js';

/**
 * The worker: one poll loop with `concurrency` slots. While work is due and slots are free it keeps up to
 * `MAX_CLAIMS_IN_FLIGHT` claims in flight, an empty poll waits as `PollPacing` says (the poll interval or the next
 * due time, cut short by a local enqueue, a change event or a freed slot), and every claim/finalize error is logged
 * without stopping the loop. A slot is held until its handler settles and its outcome is written, never just until a
 * timer fires.
 */
@Injectable()
export class JobRunner implements OnApplicationBootstrap, BeforeApplicationShutdown, WorkerState {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);
  /** One job can have two executions here (a cancelled attempt still settling, and a retry). */
  private readonly running = new Set<RunningExecution>();
  /** Per name, its executions here plus the claims in flight that may return it, against its concurrency. */
  private readonly names = new NameCapacity((name) => this.limitOf(name));
  /** Slots held by claims sent and not answered yet (a batch claim holds as many as it may fill). */
  private claimsInFlight = 0;
  /** Claim steps sent and not answered yet (what shutdown reports as unanswered claims). */
  private claimSteps = 0;
  /** Slots `runNow` calls hold while they claim (see `reserveSlot`): the poll loop and other runNows leave them free. */
  private reservedSlots = 0;
  private readonly pacing: PollPacing;
  /** Slots whose outcome is being written: a claim in a backlog waits for them (see `FinishingSlots`). */
  private readonly finishing: FinishingSlots;
  private loop?: Promise<void>;
  private stopping = false;
  private shutdownDone?: Promise<void>;
  /** Starts claimed jobs in their slots: lease, handler, outcome write. */
  private readonly launcher: ExecutionLauncher;
  /** How an execution holds its slot here (one object for all of them: nothing allocated per job). */
  private readonly slots: ExecutionSlot = {
    taken: (entry) => {
      this.running.add(entry);
      this.names.adjustRunning(entry.execution.claim.doc.name, +1);
    },
    handlerSettled: (entry) => this.finishing.handlerSettled(entry),
    freed: (entry) => {
      const { doc } = entry.execution.claim;
      this.running.delete(entry);
      this.finishing.freed(entry);
      this.names.adjustRunning(doc.name, -1);
      this.claims.slotFreed(doc.name);
      this.pacing.wake();
    },
  };
  /** Claims handed back or set aside instead of started: shutdown waits for their writes. */
  private readonly unstarted: UnstartedClaims;
  private readonly record = new PollRecord();
  /** The last burst ended with every slot full, work likely still due: the next one opens with a batch claim. */
  private backlog = false;

  constructor(
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
    private readonly registry: JobHandlerRegistry,
    private readonly claims: JobClaimService,
    heartbeat: LeaseHeartbeat,
    finalizer: JobFinalizer,
    events: JobEvents,
    @Inject(JOBS_TELEMETRY) telemetry: JobsTelemetry | null,
    private readonly deadline: ShutdownDeadline,
    workArrived: WorkArrived,
    private readonly paused: PausedNames,
    feed: JobChangeFeed,
  ) {
    this.pacing = new PollPacing(options, feed, claims);
    this.finishing = new FinishingSlots(this.pacing);
    const logError = (what: string, error: unknown) => this.logError(what, error);
    this.unstarted = new UnstartedClaims({ finalizer, events, telemetry, logger: this.logger, logError });
    this.launcher = new ExecutionLauncher({
      heartbeat,
      finalizer,
      events,
      telemetry,
      deadline,
      logger: this.logger,
      logError,
    });
    workArrived.arrivals$.subscribe((runAt) => this.pacing.arrived(runAt));
    paused.changes$.subscribe((change) => change.type === 'resumed' && this.pacing.workMayBeDue());
  }

  onApplicationBootstrap(): void {
    if (this.options.worker && !this.loop) {
      this.logger.log(`Worker ${this.options.workerId} started (concurrency ${this.options.concurrency})`);
      this.record.loopStarted();
      this.paused.startWatching();
      this.loop = this.pollLoop();
      this.pacing.listen(this.claims.runNames());
    }
  }

  /**
   * Stop claiming, let running handlers finish until the shutdown's grace end, abort the rest, and write what each
   * did. Returns by the module's shared shutdown deadline (`ShutdownDeadline.endsAt`) whatever the database does.
   */
  beforeApplicationShutdown(): Promise<void> {
    this.shutdownDone ??= this.shutdown();
    return this.shutdownDone;
  }

  /**
   * For `runNow`: holds one of the process's `concurrency` slots from before its claim until `execute` starts the job
   * in it (or `release()` when nothing is claimed). Null when every slot is running a job or held: the process is
   * busy, and nothing should be claimed.
   */
  reserveSlot(): SlotReservation | null {
    if (this.running.size + this.reservedSlots >= this.options.concurrency) return null;
    this.reservedSlots += 1;
    return new SlotReservation((freed) => {
      this.reservedSlots -= 1;
      if (freed) this.pacing.wake(); // the poll loop may claim into it now
    });
  }

  /** Tells this process's executions of a job, if any, that it was cancelled (see `JobExecution.cancel`). */
  cancelLocal(jobId: string, reason: JobCancelledError): void {
    for (const entry of this.running.values()) {
      if (entry.execution.jobId === jobId) entry.execution.cancel(reason);
    }
  }

  pollState(): PollState {
    const { intervalMs } = this.pacing;
    return { ...this.record.state(this.loop !== undefined && !this.stopping, this.running.size), intervalMs };
  }

  stopped(): Promise<void> {
    return this.beforeApplicationShutdown();
  }

  /**
   * Runs a claimed job to its end in this process and writes its result (poll loop and `runNow`). Never rejects:
   * a row that cannot run as stored is set aside (`failed`), and the outcome says the handler did not start.
   * `reservation`: the slot `runNow` reserved for this claim, which the job starts in.
   */
  async execute(claim: ClaimedJob, reservation?: SlotReservation): Promise<ExecutionOutcome> {
    // Before any await: the reserved slot passes to this job at once, and no other claim can take it meanwhile.
    reservation?.passToJob();
    const jobId = describeJobId(claim.doc?._id);
    try {
      const problem = whyNotRunnable(claim.doc);
      if (problem) return await this.setAside(claim, jobId, problem);
      const handler = this.startableHandler(claim.doc.name);
      // Started in a slot (`ExecutionLauncher`), counted taken before the handler runs.
      if (typeof handler !== 'string') return await this.launcher.launch(claim, handler, jobId, this.slots);
      // Checked here, where the slot is taken synchronously: covers runNow and a claim racing another one too.
      await this.unstarted.handBack(claim, jobId, this.stopping);
      return { kind: 'not_started', reason: handler };
    } catch (error) {
      return this.setAside(claim, jobId, `starting it failed: ${errorInfo(error).message}`);
    }
  }

  /** The handler a new execution of `name` would run now, or why none may start. */
  private startableHandler(name: string): RegisteredJobHandler | string {
    const handler = this.registry.get(name);
    if (!handler) return `no handler for "${name}" in this process`;
    if (this.stopping) return 'the worker is shutting down';
    // A claim sent (or in doubt) before this process learnt of a pause: handed back, the job waits for `resume`.
    if (this.paused.has(name)) return `"${name}" is paused`;
    // A poll-loop claim that landed after runNow calls took the free slots (or a runNow that reserved none).
    if (this.running.size + this.reservedSlots >= this.options.concurrency) {
      return `this process is at its concurrency (${this.options.concurrency})`;
    }
    if (this.names.runningOf(name) >= handler.concurrency) {
      return `"${name}" is at its concurrency limit (${handler.concurrency}) in this process`;
    }
    return handler;
  }

  private async setAside(claim: ClaimedJob, jobId: string, reason: string): Promise<ExecutionOutcome> {
    await this.unstarted.setAside(claim, jobId, reason);
    return { kind: 'not_started', reason: `the row cannot run as stored: ${reason}` };
  }

  /** One bad row or one failed call must never end the loop: anything thrown is logged and the loop goes on. */
  private async pollLoop(): Promise<void> {
    while (!this.stopping) {
      try {
        await this.pollOnce();
      } catch (error) {
        this.logError('Polling', error);
        await this.pacing.wait(this.options.pollIntervalMs);
      }
    }
  }

  private async pollOnce(): Promise<void> {
    // A worker booting during a pause must honour it: no claim before one read (a failed one throws: logged, retried).
    if (!this.paused.known) await this.paused.read();
    if (this.running.size + this.reservedSlots >= this.options.concurrency) {
      this.record.polled(); // all slots busy is "on schedule" too
      await this.pacing.wait(this.options.pollIntervalMs);
      return;
    }
    const { end, everyClaimFailed } = await claimBurst(
      {
        room: () => this.room(),
        nextNames: () => {
          const excluded = this.names.saturated();
          return { excluded, names: this.claims.claimableNames(excluded) };
        },
        nothingToAsk: () => this.record.polled(),
        claim: (excluded, names, want) => this.claimStep(excluded, names, want),
        gather: () =>
          this.finishing.gather(
            this.running.size,
            () => this.room(),
            () => this.stopping,
          ),
      },
      this.backlog,
      this.options.claimBatchSize,
    );
    // Every slot filled: there is likely more due, and the next burst (when slots free up) opens with a batch.
    this.backlog = end === 'full';
    // Counted per poll, not per claim: a burst whose every claim threw is one failed poll.
    if (everyClaimFailed) this.record.claimsFailed();
    if (end !== 'full') await this.pacing.waitIdle();
  }

  /** Slots free besides those the claims in flight hold (0 when stopping). */
  private room(): number {
    return this.stopping ? 0 : this.options.concurrency - this.running.size - this.reservedSlots - this.claimsInFlight;
  }

  /**
   * One claim step among `names`: a batch claim of up to `want` jobs over all of them, in claim order, taking of each
   * name no more than its room in its per-process `concurrency` (see `JobClaimService.claimBatch`); or, when `want` is
   * one, the batch does not apply, or it takes nothing, one claim. While it is in flight it holds the slots it may fill
   * and counts them against the free capacity of every name it may return, so that claims in flight together never
   * take more of a name than its limit allows.
   */
  private async claimStep(excluded: string[], names: readonly string[], want: number): Promise<ClaimStepAnswer> {
    const rooms = new Map(names.map((name) => [name, this.names.roomOf(name)]));
    const size = Math.max(1, Math.min(want, Math.max(...rooms.values())));
    this.claimsInFlight += size;
    this.claimSteps += 1;
    this.names.adjustClaiming(names, size);
    let claims: ClaimedJob[];
    try {
      const batch = size > 1 ? await this.claims.claimBatch(names, size, (name) => rooms.get(name) ?? 0) : null;
      if (batch) claims = batch;
      else {
        const claim = await this.claims.claimNext(excluded);
        claims = claim ? [claim] : [];
      }
    } catch (error) {
      this.logError('Claiming a job', error);
      return { result: 'failed', jobs: 0 };
    } finally {
      this.claimsInFlight -= size;
      this.claimSteps -= 1;
      this.names.adjustClaiming(names, -size);
      this.record.polled();
    }
    this.record.claimAnswered();
    if (claims.length === 0) {
      // Nothing due among `names`; a name left out only for claims in flight that has room again was not asked for.
      const saturated = this.names.saturated();
      const result = excluded.some((name) => !saturated.includes(name)) ? 'inconclusive' : 'empty';
      return { result, jobs: 0 };
    }
    if (this.stopping) {
      // Shutdown began while this claim was in flight: hand its jobs straight back rather than strand them.
      await Promise.all(claims.map((claim) => this.unstarted.handBack(claim, describeJobId(claim.doc?._id), true)));
    } else {
      for (const claim of claims) void this.execute(claim); // each takes its slot synchronously
    }
    return { result: 'claimed', jobs: claims.length };
  }

  private async shutdown(): Promise<void> {
    this.stopping = true;
    this.pacing.stop();
    const fates = await shutDownSlots(
      { loop: this.loop, running: () => [...this.running.values()] },
      this.deadline,
      this.logger,
    );
    // Hand-backs sent before shutdown began, maybe retrying through errors: their rows must not be left running.
    await this.unstarted.settled(this.deadline);
    const summary = describeShutdown({
      fates: [...fates, ...this.unstarted.shutdownHandBacks],
      unansweredClaims: this.claimSteps,
    });
    this.logger.log(`Worker ${this.options.workerId} stopped: ${summary}`);
  }

  private limitOf(name: string): number {
    return this.registry.get(name)?.concurrency ?? Number.POSITIVE_INFINITY;
  }

  private logError(what: string, error: unknown): void {
    const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
    this.record.failed(`${what} failed: ${error instanceof Error ? error.message : String(error)}`);
    this.logger.error(`${what} failed: ${detail}`);
  }
}
