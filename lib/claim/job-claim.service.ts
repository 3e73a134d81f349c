import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { Types } from 'mongoose';
import { JobHandlerRegistry } from '../discovery/job-handler.registry.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { JobEvents } from '../events/job-events.js';
import { JOBS_LOGGER_CONTEXT, JOBS_RESOLVED_OPTIONS } from '../jobs.constants.js';
import type { ResolvedJobsOptions } from '../jobs.options.js';
import { type FleetLimits, hasFleetLimits } from '../limits/fleet-limits.js';
import { LimitedClaim, type LimitedTakeResult } from '../limits/limited-claim.js';
import type { ByIdScope, ClaimScope, ClaimSource } from '../persistence/claim-queries.js';
import { classifyWriteError, isDocumentUpdateError, isSameRefusal } from '../persistence/database-errors.js';
import type { JobDocument } from '../persistence/job.schema.js';
import { JobClaimStore } from '../persistence/job-claim.store.js';
import { JobOutcomeStore } from '../persistence/job-outcome.store.js';
import { JobReadStore } from '../persistence/job-read.store.js';
import { JobRetention } from '../retention/job-retention.service.js';
import type { ClaimedJob } from '../types/claimed-job.js';
import { addMs, now } from '../utils/clock.js';
import { errorInfo } from '../utils/error-info.js';
import { type ClaimEntry, ClaimSkips, UNLIMITED } from './claim-skips.js';
import { ClaimsInDoubt } from './claims-in-doubt.js';
import { LockIdSequence } from './lock-id.js';
import { SetAsideIds } from './set-aside-ids.js';

/**
 * What `claimById` did: claimed the row, dead-lettered it (its lost attempt was its last), set it aside as `failed`
 * (the server refuses to claim it as stored), or found nothing to take.
 */
export type ClaimByIdResult =
  | { kind: 'claimed'; claim: ClaimedJob }
  | { kind: 'dead_lettered'; doc: JobDocument }
  | { kind: 'set_aside'; reason: string }
  /** Its name is at a fleet-wide limit (`globalConcurrency`, `groupConcurrency` for its group, or `rateLimit`). */
  | { kind: 'limited' }
  | { kind: 'missed' };

/** A limited name's claim sources: expired leases first when a search for them is due, else due rows only. */
const RECLAIM_FIRST: readonly ClaimSource[] = ['running', 'pending'];
const PENDING_ONLY: readonly ClaimSource[] = ['pending'];
/** Tries of one limited name's claim that another claimer beat to a slot or row, before the claim gives up. */
const LIMITED_CLAIM_TRIES = 3;

/**
 * Rows refused by the server that one claim step sets aside with no claim in between; then the step throws, so a
 * refusal that somehow holds for row after row turns health down instead of failing the queue a few rows a poll.
 */
const MAX_SET_ASIDE_PER_STEP = 5;
/** Refused rows remembered in memory when the server refuses to mark them `failed` too (each one is in every claim's filter). */
const SET_ASIDE_MEMORY = 100;
/** A server refusal of a claim write (see `isDocumentUpdateError`). */
type RefusalError = Error & { code?: unknown };

/** `runNow` looks for a due row first, then for an expired lease. */
const SOURCES_BY_ID: readonly ClaimSource[] = ['pending', 'running'];

/** Moves rows into `running` for this worker: expired leases first, then due pending rows. */
@Injectable()
export class JobClaimService implements OnApplicationBootstrap {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);
  private readonly lockIds: LockIdSequence;
  private readonly setAsideIds = new SetAsideIds(SET_ASIDE_MEMORY);
  /** Names the poll loop claims: set at bootstrap, when every handler is registered. */
  private runnable: string[] = [];
  /** When a search for expired leases last came back empty (epoch ms). */
  private lastReclaimSearchAt = Number.NEGATIVE_INFINITY;
  /** A search for expired leases is under way: concurrent claim steps leave it to that one instead of repeating it. */
  private reclaimSearching = false;
  /** Set-aside writes under way, by row id: a second claim step that hits the same refused row waits for the first. */
  private readonly settingAside = new Map<string, Promise<string | null>>();
  /** Names with fleet-wide limits among those this process runs (set at bootstrap), each claimed on its own. */
  private limited = new Map<string, FleetLimits>();
  /** Which limited names (and the unlimited ones beside them) claims skip until the next poll. */
  private readonly skips: ClaimSkips;
  /** Rotates the claim order over the unlimited names and each limited one, so that none is starved. */
  private turn = 0;

  constructor(
    private readonly claims: JobClaimStore,
    private readonly reads: JobReadStore,
    private readonly outcomes: JobOutcomeStore,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
    private readonly events: JobEvents,
    private readonly registry: JobHandlerRegistry,
    private readonly retention: JobRetention,
    private readonly limitedClaim: LimitedClaim,
    private readonly inDoubt: ClaimsInDoubt,
  ) {
    this.lockIds = new LockIdSequence(options.workerId);
    this.skips = new ClaimSkips(options.pollIntervalMs);
  }

  /**
   * Handlers are registered by now (the explorer runs in `onModuleInit`): fixes the names the poll loop claims.
   * @throws InvalidOptionError when a `runOnly` entry has no handler in this process
   */
  onApplicationBootstrap(): void {
    this.runnable = this.runnableNames();
    this.limited = new Map();
    for (const handler of this.registry.all()) {
      if (hasFleetLimits(handler.limits)) this.limited.set(handler.name, handler.limits);
    }
  }

  /** An execution of `name` in this process ended: a limited name found full is worth a claim again. */
  slotFreed(name: string): void {
    this.skips.slotFreed(name);
  }

  /** A job was enqueued (or revived) in this process: limited names found empty are worth a claim again. */
  jobsArrived(): void {
    this.skips.jobsArrived();
  }

  /** Every name with a handler here, or `runOnly`. */
  private runnableNames(): string[] {
    const { runOnly } = this.options;
    const unhandled = runOnly?.filter((name) => !this.registry.get(name)) ?? [];
    if (unhandled.length > 0) {
      const names = unhandled.map((name) => JSON.stringify(name)).join(', ');
      throw new InvalidOptionError('runOnly', runOnly, `names ${names} with no @JobHandler in this process`);
    }
    return runOnly ?? this.registry.names();
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
      const entry = order[(this.turn + step) % order.length];
      let claim: ClaimedJob | null = null;
      if (entry === UNLIMITED) claim = await this.claimUnlimitedBeside(unlimited);
      else {
        try {
          claim = await this.claimLimited(entry);
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
    const reclaimDue =
      !this.reclaimSearching && now().getTime() - this.lastReclaimSearchAt >= this.options.pollIntervalMs;
    if (reclaimDue) {
      const reclaimed = await this.searchExpired(names);
      if (reclaimed) return reclaimed;
    }
    const due = await this.takeNext('pending', names);
    if (due) return due;
    // A concurrent step searching for expired leases right now covers this one's search.
    return reclaimDue || this.reclaimSearching ? null : this.searchExpired(names);
  }

  /**
   * One claim of a name with fleet-wide limits (`LimitedClaim`): its expired leases at most once per poll interval,
   * then a due row. A name found at its limit is skipped until the next poll interval or until one of its executions
   * here ends. A row the server refuses to take (confirmed on exactly that row, with its slots) is set aside as
   * `failed`, like a refused row of any name; a refusal that names no row is logged and the name skipped likewise.
   */
  private async claimLimited(name: string): Promise<ClaimedJob | null> {
    if (this.skips.isSkipped(name)) return null;
    const arrivals = this.skips.arrivals;
    const limits = this.limited.get(name) as FleetLimits;
    for (const source of this.skips.startReclaimSearch(name) ? RECLAIM_FIRST : PENDING_ONLY) {
      for (let contended = 0; contended < LIMITED_CLAIM_TRIES; ) {
        const at = now();
        const lockId = this.lockIds.next();
        const lockedUntil = addMs(at, this.options.leaseMs);
        let result: LimitedTakeResult;
        try {
          result = await this.inDoubt.send(
            { lockId, lockedUntil },
            () =>
              this.limitedClaim.take({
                name,
                limits,
                source,
                at,
                lockId,
                lockedUntil,
                skipIds: this.setAsideIds.values(),
                skipLocks: this.byIdScope(source, [name]).skipLocks,
              }),
            (doc) => ({ kind: 'taken', doc, reclaimed: source === 'running' }),
          );
        } catch (error) {
          if (!isDocumentUpdateError(error)) throw error;
          this.logger.error(
            `Claiming a job of "${name}" was refused by the server: ${error.message}; skipping it this poll`,
          );
          this.skips.markFull(name);
          return null;
        }
        if (result.kind === 'taken') {
          const claim = { doc: result.doc, lockId };
          if (result.reclaimed) this.skips.reclaimFound(name);
          if (!result.reclaimed || (await this.keepReclaimed(claim, now()))) return claim;
        } else if (result.kind === 'refused') {
          // Set aside like a refused row of any name (it leaves `running`/`pending` for `failed`, slots unset).
          await this.setAsideRefused(result, name);
          contended += 1;
        } else if (result.kind === 'full') {
          this.skips.markFull(name);
          return null;
        } else if (result.kind === 'none') break;
        else contended += 1;
      }
    }
    this.skips.markEmpty(name, arrivals);
    return null;
  }

  /** Sets aside a row of a limited name whose take the server refused (see `retryRow`), unless the update itself is refused. */
  private async setAsideRefused(
    { id, source, error }: { id: Types.ObjectId; source: ClaimSource; error: RefusalError },
    name: string,
  ): Promise<string | null> {
    await this.assertRefusalIsAboutARow(source, error, [name]);
    return this.setAside(source, { _id: id, name }, error.message, now());
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
   * The names a `claimNext(excludedNames)` may return a job of: every name the poll loop runs, minus those, and minus
   * the names a claim skips until the next poll (limited names found full or empty, unlimited names found empty beside
   * them). None left: the poll loop sends no claim and waits for its claims in flight, as when every name is at its
   * concurrency; a claim of skipped names only would come back empty at once and end the burst while those claims may
   * still free room. May be this service's own list: callers must not change it.
   */
  claimableNames(excludedNames: readonly string[]): string[] {
    const names = excludedNames.length === 0 ? this.runnable : this.runnable.filter((n) => !excludedNames.includes(n));
    if (this.limited.size === 0) return names;
    const at = Date.now();
    const unlimitedSkipped = this.skips.isSkipped(UNLIMITED, at);
    return names.filter((name) => (this.limited.has(name) ? !this.skips.isSkipped(name, at) : !unlimitedSkipped));
  }

  /**
   * For `runNow`: claims exactly this job when it is pending and due, or takes it over like a reclaim when it is
   * running with an expired lease (dead-lettering it if that lost attempt was its last). A row the server refuses to
   * take as stored is set aside as `failed`. Only names with a handler in this process are taken; `runOnly` does not
   * apply.
   */
  async claimById(id: Types.ObjectId): Promise<ClaimByIdResult> {
    const names = this.registry.names();
    const row = this.limited.size === 0 ? null : await this.reads.findById(id);
    const limits = row ? this.limited.get(row.name) : undefined;
    if (row && limits) return this.claimLimitedById(id, row.name, limits);
    for (const source of SOURCES_BY_ID) {
      const at = now();
      const lockId = this.lockIds.next();
      const lockedUntil = addMs(at, this.options.leaseMs);
      let taken: ClaimedJob | 'changed' | { setAside: string | null };
      try {
        const doc = await this.inDoubt.send(
          { lockId, lockedUntil },
          () => this.claims.takeById(source, id, at, lockId, lockedUntil, this.byIdScope(source, names)),
          (row) => row,
        );
        taken = doc ? { doc, lockId } : 'changed';
      } catch (error) {
        if (!isDocumentUpdateError(error)) throw error;
        await this.assertRefusalIsAboutARow(source, error, names);
        const row = await this.reads.findById(id);
        if (!row) return { kind: 'missed' };
        taken = await this.retryRow(source, row, error, names);
      }
      if (taken === 'changed') continue;
      if ('setAside' in taken)
        return taken.setAside ? { kind: 'set_aside', reason: taken.setAside } : { kind: 'missed' };
      if (source === 'pending' || (await this.keepReclaimed(taken, now()))) return { kind: 'claimed', claim: taken };
      return { kind: 'dead_lettered', doc: taken.doc };
    }
    return { kind: 'missed' };
  }

  /** `claimById` for a name with fleet-wide limits: the row takes its slots (and a rate token) like any claim. */
  private async claimLimitedById(id: Types.ObjectId, name: string, limits: FleetLimits): Promise<ClaimByIdResult> {
    for (const source of SOURCES_BY_ID) {
      const at = now();
      const lockId = this.lockIds.next();
      const lockedUntil = addMs(at, this.options.leaseMs);
      const skipIds = this.setAsideIds.values();
      const { skipLocks } = this.byIdScope(source, [name]);
      const result = await this.inDoubt.send(
        { lockId, lockedUntil },
        () => this.limitedClaim.take({ name, limits, source, at, lockId, lockedUntil, skipIds, skipLocks, id }),
        (doc): LimitedTakeResult => ({ kind: 'taken', doc, reclaimed: source === 'running' }),
      );
      if (result.kind === 'full' || result.kind === 'contended') return { kind: 'limited' };
      if (result.kind === 'none') continue;
      if (result.kind === 'refused') {
        const reason = await this.setAsideRefused(result, name);
        return reason ? { kind: 'set_aside', reason } : { kind: 'missed' };
      }
      const claim = { doc: result.doc, lockId };
      if (!result.reclaimed || (await this.keepReclaimed(claim, now()))) return { kind: 'claimed', claim };
      return { kind: 'dead_lettered', doc: result.doc };
    }
    return { kind: 'missed' };
  }

  /** `reclaimNext`, marked as under way so that concurrent claim steps do not search too. */
  private async searchExpired(names: string[]): Promise<ClaimedJob | null> {
    this.reclaimSearching = true;
    try {
      return await this.reclaimNext(names);
    } finally {
      this.reclaimSearching = false;
    }
  }

  /** Takes over the oldest expired lease, dead-lettering those whose lost attempt was their last. */
  private async reclaimNext(names: string[]): Promise<ClaimedJob | null> {
    for (;;) {
      const searchedAt = now().getTime();
      const reclaimed = await this.takeNext('running', names);
      if (!reclaimed) {
        // Only a search that found nothing resets the clock: while expired rows remain, keep draining them.
        this.lastReclaimSearchAt = searchedAt;
        return null;
      }
      if (await this.keepReclaimed(reclaimed, now())) return reclaimed;
    }
  }

  /** False (and the row dead-lettered) when the reclaim's lost attempt was the job's last. */
  private async keepReclaimed({ doc, lockId }: ClaimedJob, at: Date): Promise<boolean> {
    if (doc.attemptCount < doc.maxAttempts) return true;
    if (await this.outcomes.deadLetter(doc._id, lockId, at, this.retention.expiresAt('dead', doc, at))) {
      const about = { jobId: doc._id.toHexString(), name: doc.name, attempt: doc.attemptCount };
      this.events.emit('dead', about, doc.lastError ?? 'Lease expired');
    }
    this.logger.warn(
      `Job ${doc._id.toHexString()} (${doc.name}) dead-lettered: its lease expired on the last of ${doc.maxAttempts} attempts`,
    );
    return false;
  }

  /**
   * One claim (`pending`) or reclaim (`running`) step. A row the server refuses to update would sort first on every
   * poll and stall the queue: it is set aside and the step tried again, a few times at most.
   */
  private async takeNext(source: ClaimSource, names: string[]): Promise<ClaimedJob | null> {
    for (let setAside = 0; setAside < MAX_SET_ASIDE_PER_STEP; setAside += 1) {
      const at = now();
      const lockId = this.lockIds.next();
      const scope = this.scope(source, names);
      const lockedUntil = addMs(at, this.options.leaseMs);
      try {
        const doc = await this.inDoubt.send(
          { lockId, lockedUntil },
          () => this.claims.take(source, at, lockId, lockedUntil, scope),
          (row) => row,
        );
        return doc && { doc, lockId };
      } catch (error) {
        if (!isDocumentUpdateError(error)) throw error;
        await this.assertRefusalIsAboutARow(source, error, names);
        const probed = await this.probe(source, scope, error);
        if (probed !== 'retry') return probed;
      }
    }
    throw new Error(
      `${MAX_SET_ASIDE_PER_STEP} ${source} rows in a row were refused by the server and set aside, with no claim in ` +
        'between; this poll stops here (the next one goes on)',
    );
  }

  /**
   * Rethrows `refusal` when the same write refuses a row that does not exist: then the server objects to the
   * update itself, not to a row, and marking rows `failed` would fail healthy jobs.
   */
  private async assertRefusalIsAboutARow(source: ClaimSource, refusal: Error, names: string[]): Promise<void> {
    const at = now();
    try {
      await this.claims.takeById(source, new Types.ObjectId(), at, this.lockIds.next(), at, { names });
    } catch (error) {
      if (isDocumentUpdateError(error)) throw refusal;
      throw error;
    }
  }

  /**
   * After a claim the server refused for a document: finds the row that claim would take (none: the refusal is
   * rethrown) and retries exactly that row.
   */
  private async probe(source: ClaimSource, scope: ClaimScope, refusal: RefusalError): Promise<ClaimedJob | 'retry'> {
    const row = await this.claims.peek(source, now(), scope);
    if (!row) throw refusal;
    const taken = await this.retryRow(source, row, refusal, scope.names);
    return taken === 'changed' || 'setAside' in taken ? 'retry' : taken;
  }

  /**
   * Repeats a refused take on exactly this row. Success means the refusal was about something else (the row is ours
   * now); no match means the row changed state meanwhile; the same refusal (same code) confirms the row is the
   * culprit, and it is set aside. Any other error is thrown.
   */
  private async retryRow(
    source: ClaimSource,
    row: { _id: Types.ObjectId; name: string },
    refusal: RefusalError,
    names: string[],
  ): Promise<ClaimedJob | 'changed' | { setAside: string | null }> {
    const at = now();
    const lockId = this.lockIds.next();
    try {
      const lockedUntil = addMs(at, this.options.leaseMs);
      const doc = await this.claims.takeById(source, row._id, at, lockId, lockedUntil, this.byIdScope(source, names));
      return doc ? { doc, lockId } : 'changed';
    } catch (error) {
      if (!isDocumentUpdateError(error) || !isSameRefusal(error, refusal)) throw error;
      return { setAside: await this.setAside(source, row, error.message, at) };
    }
  }

  /**
   * Marks a refused row `failed`; resolves the reason, or null when the row no longer matched or the server refused
   * that write too for its document (the row is then skipped in memory). Any other failure of that write (network,
   * an unfamiliar server code) is thrown: the row is probed again on a later poll. A concurrent claim step that hits
   * the same row waits for the first one's write (which alone logs and emits), and a row already skipped in memory is
   * not written again.
   */
  private setAside(
    source: ClaimSource,
    row: { _id: Types.ObjectId; name: string },
    cause: string,
    at: Date,
  ): Promise<string | null> {
    const jobId = row._id.toHexString();
    const underWay = this.settingAside.get(jobId);
    if (underWay) return underWay.catch(() => null);
    if (this.setAsideIds.has(row._id)) return Promise.resolve(null);
    const write = this.writeSetAside(source, row, cause, at).finally(() => this.settingAside.delete(jobId));
    this.settingAside.set(jobId, write);
    return write;
  }

  private async writeSetAside(
    source: ClaimSource,
    row: { _id: Types.ObjectId; name: string },
    cause: string,
    at: Date,
  ): Promise<string | null> {
    const jobId = row._id.toHexString();
    const reason = `Job could not be ${source === 'pending' ? 'claimed' : 'reclaimed'}: the server rejected the update as stored (${cause})`;
    try {
      const expiresAt = this.retention.expiresAt('failed', row, at);
      if (!(await this.claims.setAside(row._id, source, reason, at, expiresAt))) return null;
    } catch (error) {
      if (classifyWriteError(error) !== 'permanent') throw error;
      this.setAsideIds.add(row._id);
      this.logger.error(
        `Job ${jobId} (${row.name}) is skipped by this worker: ${reason}; marking it failed was refused too (${errorInfo(error).message})`,
      );
      return null;
    }
    this.logger.error(`Job ${jobId} (${row.name}) marked failed: ${reason}`);
    this.events.emit('failed', { jobId, name: row.name, attempt: 0 }, reason);
    return reason;
  }

  /** What a claim step may take: `names`, minus the rows set aside here and (a reclaim) this process's unresolved claims. */
  private scope(source: ClaimSource, names: string[]): ClaimScope {
    return { skipIds: this.setAsideIds.values(), ...this.byIdScope(source, names) };
  }

  /** A reclaim skips rows under this process's claims still unanswered (`ClaimsInDoubt.unresolvedLocks`). */
  private byIdScope(source: ClaimSource, names: string[]): ByIdScope {
    return source === 'running' ? { names, skipLocks: this.inDoubt.unresolvedLocks() } : { names };
  }
}
