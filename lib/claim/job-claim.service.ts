import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import type { Types } from 'mongoose';
import { type FleetLimits, hasFleetLimits } from '../handlers/fleet-limits.js';
import { JobHandlerRegistry } from '../handlers/job-handler.registry.js';
import { JobRetention } from '../handlers/job-retention.service.js';
import type { ClaimedJob, ClaimedRow } from '../model/claimed-job.js';
import { addMs, now } from '../model/clock.js';
import { errorInfo } from '../model/error-info.js';
import { JobEvents } from '../model/events/job-events.js';
import { JOBS_LOGGER_CONTEXT, JOBS_RESOLVED_OPTIONS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { JOBS_TELEMETRY, type JobsTelemetry } from '../model/jobs-telemetry.js';
import { ShutdownDeadline } from '../model/shutdown-deadline.js';
import type { ByIdScope, ClaimScope, ClaimSource } from '../persistence/claim-queries.js';
import { type ClaimRefusal, isRefusal } from '../persistence/claim-refusal.js';
import { JobClaimStore } from '../persistence/job-claim.store.js';
import { JobOutcomeStore } from '../persistence/job-outcome.store.js';
import { JobReadStore } from '../persistence/job-read.store.js';
import { BatchClaim } from './batch-claim.js';
import { ClaimById, type ClaimByIdResult } from './claim-by-id.js';
import { type ClaimEntry, ClaimSkips, UNLIMITED } from './claim-skips.js';
import { ClaimsInDoubt } from './claims-in-doubt.js';
import { ExpiredLeaseSearch } from './expired-lease-search.js';
import { LastAttempts } from './last-attempts.js';
import { LimitedClaim } from './limited-claim.js';
import { LimitedNameStep } from './limited-name-step.js';
import { LockIdSequence } from './lock-id.js';
import { NextDue } from './next-due.js';
import { PausedNames } from './paused-names.js';
import { RefusedRows } from './refused-rows.js';
import { runnableNames } from './runnable-names.js';

export type { ClaimByIdResult } from './claim-by-id.js';

/** Refused rows one claim step sets aside with no claim between; then it throws (health down, not a failing queue). */
const MAX_SET_ASIDE_PER_STEP = 5;

/** Moves rows into `running` for this worker: expired leases first, then due pending rows. */
@Injectable()
export class JobClaimService implements OnApplicationBootstrap {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);
  private readonly lockIds: LockIdSequence;
  /** Rows the server refuses to claim as stored: pinned on one row, and set aside. */
  private readonly refused: RefusedRows;
  private readonly byId: ClaimById;
  private readonly batch: BatchClaim;
  /** One claim of a name with fleet-wide limits, its tries and skips. */
  private readonly limitedStep: LimitedNameStep;
  private readonly lastAttempts: LastAttempts;
  /** Names the poll loop claims: set at bootstrap, when every handler is registered. */
  private runnable: string[] = [];
  /** When to look for expired leases of the names without fleet-wide limits, and the search. */
  private readonly expired: ExpiredLeaseSearch;
  /** Names with fleet-wide limits among those this process runs (set at bootstrap), each claimed on its own. */
  private limited = new Map<string, FleetLimits>();
  /** Which limited names (and the unlimited ones beside them) claims skip until the next poll. */
  private readonly skips: ClaimSkips;
  /** Rotates the claim order over the unlimited names and each limited one, so that none is starved. */
  private turn = 0;
  /** When the next pending job of the names without fleet-wide limits falls due, as far as this process knows. */
  readonly nextDue = new NextDue();

  constructor(
    private readonly claims: JobClaimStore,
    reads: JobReadStore,
    outcomes: JobOutcomeStore,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
    events: JobEvents,
    private readonly registry: JobHandlerRegistry,
    retention: JobRetention,
    limitedClaim: LimitedClaim,
    private readonly inDoubt: ClaimsInDoubt,
    private readonly deadline: ShutdownDeadline,
    private readonly paused: PausedNames,
    @Inject(JOBS_TELEMETRY) telemetry: JobsTelemetry | null,
  ) {
    this.lockIds = new LockIdSequence(options.workerId);
    this.lastAttempts = new LastAttempts({ outcomes, retention, events, telemetry, deadline, logger: this.logger });
    this.expired = new ExpiredLeaseSearch(
      options.pollIntervalMs,
      (names) => this.takeNext('running', names),
      this.lastAttempts,
    );
    this.skips = new ClaimSkips(options.pollIntervalMs);
    const { lockIds, logger } = this;
    this.refused = new RefusedRows({
      claims,
      events,
      logger,
      lockIds,
      leaseMs: options.leaseMs,
      failedExpiry: (row, at) => retention.expiresAt('failed', row, at),
      inDoubt,
    });
    this.byId = new ClaimById({
      claims,
      reads,
      limitedClaim,
      inDoubt,
      refused: this.refused,
      lockIds,
      leaseMs: options.leaseMs,
      handledNames: () => this.registry.names().filter((name) => !this.paused.has(name)),
      limitsOf: (name) => this.limited.get(name),
      hasLimitedNames: () => this.limited.size > 0,
      byIdScope: (source, names) => this.byIdScope(source, names),
      keepReclaimed: (claim, at) => this.lastAttempts.keepReclaimed(claim, at),
    });
    const { leaseMs, pollIntervalMs } = options;
    const skipIds = () => this.refused.skipIds();
    this.batch = new BatchClaim({ claims, inDoubt, lockIds, logger, leaseMs, pollIntervalMs, skipIds });
    this.limitedStep = new LimitedNameStep({
      limitedClaim,
      inDoubt,
      refused: this.refused,
      lockIds,
      skips: this.skips,
      lastAttempts: this.lastAttempts,
      deadline,
      logger,
      leaseMs,
      byIdScope: (source, names) => this.byIdScope(source, names),
    });
  }

  /**
   * Handlers are registered by now (the explorer runs in `onModuleInit`): fixes the names the poll loop claims.
   * @throws InvalidOptionError when a `runOnly` entry has no handler in this process
   */
  onApplicationBootstrap(): void {
    this.runnable = runnableNames(this.options.runOnly, this.registry);
    this.limited = new Map();
    for (const handler of this.registry.all()) {
      if (hasFleetLimits(handler.limits)) this.limited.set(handler.name, handler.limits);
    }
  }

  /** An execution of `name` in this process ended: a limited name found full is worth a claim again. */
  slotFreed(name: string): void {
    this.skips.slotFreed(name);
  }

  /** A job was enqueued or revived here, a name resumed, or a change event told of one: claim without reading first. */
  jobsArrived(): void {
    this.skips.jobsArrived();
    this.nextDue.arrived();
  }

  /**
   * Claims the next job among the names this process runs, minus `excludedNames` (those at their concurrency
   * limit); with none left it makes no query. Expired leases come first: a reclaimed job whose lost attempt
   * exhausts its attempts is dead-lettered here and never reaches a handler.
   *
   * Expired leases are looked for at most once per `pollIntervalMs` while pending work keeps this worker busy,
   * and after every poll that found nothing due. A lease only expires `leaseMs` after its last renewal, so this
   * delays a reclaim by at most one poll interval, and saves a query per job under load (3 → 2 round trips).
   */
  async claimNext(excludedNames: string[] = []): Promise<ClaimedJob | null> {
    const names = this.claimableNames(excludedNames);
    if (names.length === 0) return null;
    if (this.limited.size === 0) return this.claimUnlimited(names);
    const unlimited = names.filter((name) => !this.limited.has(name));
    const order: ClaimEntry[] = names.filter((name) => this.limited.has(name));
    if (unlimited.length > 0) order.push(UNLIMITED);
    this.turn = (this.turn + 1) % order.length;
    // A limited name whose claim throws is skipped until the next poll, and the others are still asked: one failing
    // name must not end every burst of the poll loop (the error is thrown when no other name had a job).
    let failure: { name: string; error: unknown } | undefined;
    for (let step = 0; step < order.length; step += 1) {
      if (this.deadline.started) break; // shutdown began: a claim landing now would be handed back at best
      const entry = order[(this.turn + step) % order.length];
      let claim: ClaimedJob | null = null;
      if (entry === UNLIMITED) claim = await this.claimUnlimitedBeside(unlimited);
      else {
        try {
          claim = await this.limitedStep.claim(entry, this.limited.get(entry) as FleetLimits);
        } catch (error) {
          this.skips.markFull(entry);
          failure ??= { name: entry, error };
        }
      }
      if (claim) {
        if (failure)
          this.logger.error(
            `Claiming a job of "${failure.name}" failed: ${errorInfo(failure.error).message}; skipping it this poll`,
          );
        return claim;
      }
    }
    if (failure) throw failure.error;
    return null;
  }

  /**
   * `claimUnlimited` beside limited names: found empty, the unlimited names are skipped like an idle limited name,
   * so that claims of a busy limited name do not each pay an empty claim of them too.
   */
  private async claimUnlimitedBeside(names: string[]): Promise<ClaimedJob | null> {
    if (this.skips.isSkipped(UNLIMITED)) return null;
    const arrivals = this.skips.arrivals;
    const claim = await this.claimUnlimited(names);
    if (!claim) this.skips.markEmpty(UNLIMITED, arrivals);
    return claim;
  }

  /**
   * One claim among names without fleet-wide limits: every such name in one query, expired leases first (see
   * `claimNext`).
   */
  private async claimUnlimited(names: string[]): Promise<ClaimedJob | null> {
    const reclaimDue = this.expired.isDue();
    if (reclaimDue) {
      const reclaimed = await this.expired.search(names);
      if (reclaimed || this.deadline.started) return reclaimed;
    }
    const due = await this.nextDue.take(
      () => this.takeNext('pending', names),
      () => this.claims.earliestRunAt(this.scope('pending', names)),
    );
    if (due) return due;
    // A concurrent step searching for expired leases right now covers this one's search.
    return reclaimDue || this.expired.underWay || this.deadline.started ? null : this.expired.search(names);
  }

  /**
   * Up to `want` due jobs among `names` in one batch (`BatchClaim`: three commands), of each name at most
   * `roomOf(name)`. A due search for expired leases runs first, and a row it takes over is the step's one job. Null
   * when a batch does not apply (a limited name among them, a row refused lately, every candidate taken by others).
   */
  async claimBatch(
    names: readonly string[],
    want: number,
    roomOf: (name: string) => number,
  ): Promise<ClaimedJob[] | null> {
    if (names.some((name) => this.limited.has(name))) return null;
    if (this.expired.isDue()) {
      const reclaimed = await this.expired.search([...names]);
      if (reclaimed) return [reclaimed];
    }
    return this.deadline.started ? [] : this.batch.take([...names], want, roomOf);
  }

  /**
   * The names this process runs (every name with a handler here, or `runOnly`), fixed at bootstrap: what `drain`
   * waits for by default and what the fleet view lists. Unlike `claimableNames`, a limited name at its limit or found
   * empty is still one of them. Callers must not change the list.
   */
  runNames(): readonly string[] {
    return this.runnable;
  }

  /**
   * The names a `claimNext(excludedNames)` may return a job of: every name the poll loop runs, minus those, the paused
   * ones (`PausedNames`: pending rows and expired leases alike, a reclaim starts the job again), and the names a claim
   * skips until the next poll (limited names found full or empty, unlimited names found empty beside them). None left:
   * the poll loop sends no claim and waits for its claims in flight (a claim of skipped names only would come back
   * empty at once and end the burst while those may still free room). May be this service's own list: do not change it.
   */
  claimableNames(excludedNames: readonly string[]): string[] {
    const { paused } = this;
    const names =
      excludedNames.length === 0 && paused.size === 0
        ? this.runnable
        : this.runnable.filter((n) => !excludedNames.includes(n) && !paused.has(n));
    if (this.limited.size === 0) return names;
    const at = Date.now();
    const unlimitedSkipped = this.skips.isSkipped(UNLIMITED, at);
    return names.filter((name) => (this.limited.has(name) ? !this.skips.isSkipped(name, at) : !unlimitedSkipped));
  }

  /**
   * For `runNow`: claims exactly this job when it is pending and due, or takes it over like a reclaim when it is
   * running with an expired lease (dead-lettering it if that lost attempt was its last). A row the server refuses to
   * take as stored is set aside as `failed`. Only names with a handler in this process and not paused (as last read
   * here: `runNow` reads them first) are taken; `runOnly` does not apply.
   */
  claimById(id: Types.ObjectId): Promise<ClaimByIdResult> {
    return this.byId.claim(id);
  }

  /**
   * One claim (`pending`) or reclaim (`running`) step. A row the server refuses to update would sort first on every
   * poll and stall the queue: it is set aside and the step tried again, a few times at most.
   */
  private async takeNext(source: ClaimSource, names: string[]): Promise<ClaimedJob | null> {
    for (let setAside = 0; setAside < MAX_SET_ASIDE_PER_STEP; setAside += 1) {
      if (this.deadline.started) return null; // after a read (the next due time, a refused row): nothing more is sent
      const at = now();
      const lockId = this.lockIds.next();
      const scope = this.scope(source, names);
      const lockedUntil = addMs(at, this.options.leaseMs);
      const outcome = await this.inDoubt.send(
        { lockId, lockedUntil },
        () => this.claims.take(source, at, lockId, lockedUntil, scope),
        (row): ClaimedRow | ClaimRefusal | null => row,
      );
      if (!isRefusal(outcome)) return outcome && { doc: outcome, lockId };
      await this.refused.assertAboutARow(source, outcome, names);
      const probed = await this.probe(source, scope, outcome);
      if (probed !== 'retry') return probed;
    }
    throw new Error(
      `${MAX_SET_ASIDE_PER_STEP} ${source} rows in a row were refused by the server and set aside, with no claim in ` +
        'between; this poll stops here (the next one goes on)',
    );
  }

  /**
   * After a claim the server refused for a document: finds the row that claim would take (none: the refusal is
   * rethrown) and retries exactly that row.
   */
  private async probe(source: ClaimSource, scope: ClaimScope, refusal: ClaimRefusal): Promise<ClaimedJob | 'retry'> {
    const row = await this.claims.peek(source, now(), scope);
    if (!row) throw refusal.error;
    const taken = await this.refused.retryRow(source, row, refusal, this.byIdScope(source, scope.names));
    return taken === 'changed' || 'setAside' in taken ? 'retry' : taken;
  }

  /** What a claim step may take: `names`, minus the rows set aside here and (a reclaim) this process's unresolved claims. */
  private scope(source: ClaimSource, names: string[]): ClaimScope {
    return { skipIds: this.refused.skipIds(), ...this.byIdScope(source, names) };
  }

  /** A reclaim skips rows under this process's claims still unanswered (`ClaimsInDoubt.unresolvedLocks`). */
  private byIdScope(source: ClaimSource, names: string[]): ByIdScope {
    return source === 'running' ? { names, skipLocks: this.inDoubt.unresolvedLocks() } : { names };
  }
}
