import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import type { Types } from 'mongoose';
import { JobHandlerRegistry } from '../discovery/job-handler.registry';
import { InvalidOptionError } from '../errors/invalid-option.error';
import { JobEvents } from '../events/job-events';
import { JOBS_LOGGER_CONTEXT, JOBS_RESOLVED_OPTIONS } from '../jobs.constants';
import type { ResolvedJobsOptions } from '../jobs.options';
import { isDocumentUpdateError } from '../persistence/database-errors';
import type { JobDocument } from '../persistence/job.schema';
import { type ClaimScope, JobsRepository } from '../persistence/jobs.repository';
import { addMs, now } from '../utils/clock';
import { errorInfo } from '../utils/error-info';
import { LockIdSequence } from './lock-id';
import { SetAsideIds } from './set-aside-ids';

/** A row this process now owns (`lockedBy === lockId`, status `running`). */
export interface ClaimedJob {
  doc: JobDocument;
  lockId: string;
}

/** What `claimById` did: claimed the row, dead-lettered it (its lost attempt was its last), or found nothing to take. */
export type ClaimByIdResult =
  | { kind: 'claimed'; claim: ClaimedJob }
  | { kind: 'dead_lettered'; doc: JobDocument }
  | { kind: 'missed' };

/** Facts for health checks about the poll loop's claims. */
export interface ClaimHealth {
  /** Claims in a row that threw (reset by any claim that did not). */
  consecutiveFailures: number;
  /** Message of the most recent claim that threw. */
  lastFailure: string | null;
}

/** Rows refused by the server that one claim step sets aside before it yields to the poll loop. */
const MAX_SET_ASIDE_PER_STEP = 10;
/** Refused rows remembered in memory when they cannot even be marked `failed`. */
const SET_ASIDE_MEMORY = 1000;

type Source = 'pending' | 'running';

/** Moves rows into `running` for this worker: expired leases first, then due pending rows. */
@Injectable()
export class JobClaimService implements OnApplicationBootstrap {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);
  private readonly lockIds: LockIdSequence;
  private readonly setAsideIds = new SetAsideIds(SET_ASIDE_MEMORY);
  private runnable?: string[];
  /** When a search for expired leases last came back empty (epoch ms). */
  private lastReclaimSearchAt = Number.NEGATIVE_INFINITY;
  private health: ClaimHealth = { consecutiveFailures: 0, lastFailure: null };

  constructor(
    private readonly repository: JobsRepository,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
    private readonly events: JobEvents,
    private readonly registry: JobHandlerRegistry,
  ) {
    this.lockIds = new LockIdSequence(options.workerId);
  }

  /** Handlers are registered by now (the explorer runs in `onModuleInit`): check `runOnly` against them. */
  onApplicationBootstrap(): void {
    this.runnableNames();
  }

  /**
   * Names the poll loop claims: every name with a handler here, or `runOnly`.
   * @throws InvalidOptionError when a `runOnly` entry has no handler in this process
   */
  runnableNames(): string[] {
    if (this.runnable) return this.runnable;
    const { runOnly } = this.options;
    const unhandled = runOnly?.filter((name) => !this.registry.get(name)) ?? [];
    if (unhandled.length > 0) {
      const names = unhandled.map((name) => JSON.stringify(name)).join(', ');
      throw new InvalidOptionError('runOnly', runOnly, `names ${names} with no @JobHandler in this process`);
    }
    this.runnable = runOnly ?? this.registry.names();
    return this.runnable;
  }

  claimHealth(): ClaimHealth {
    return { ...this.health };
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
    const names = this.runnableNames().filter((name) => !excludedNames.includes(name));
    if (names.length === 0) return null;
    try {
      const claim = await this.claimAmong(names);
      this.health = { consecutiveFailures: 0, lastFailure: null };
      return claim;
    } catch (error) {
      this.health = {
        consecutiveFailures: this.health.consecutiveFailures + 1,
        lastFailure: errorInfo(error).message,
      };
      throw error;
    }
  }

  /**
   * For `runNow`: claims exactly this job when it is pending and due, or takes it over like a reclaim when it is
   * running with an expired lease (dead-lettering it if that lost attempt was its last). Only names with a handler
   * in this process are taken; `runOnly` does not apply.
   */
  async claimById(id: Types.ObjectId): Promise<ClaimByIdResult> {
    const names = this.registry.names();
    const at = now();
    const lockId = this.lockIds.next();
    const doc = await this.repository.claimById(id, at, lockId, addMs(at, this.options.leaseMs), names);
    if (doc) return { kind: 'claimed', claim: { doc, lockId } };
    const reclaimAt = now();
    const reclaimLock = this.lockIds.next();
    const until = addMs(reclaimAt, this.options.leaseMs);
    const reclaimed = await this.repository.reclaimById(id, reclaimAt, reclaimLock, until, names);
    if (!reclaimed) return { kind: 'missed' };
    const claim = { doc: reclaimed, lockId: reclaimLock };
    if (await this.keepReclaimed(claim, reclaimAt)) return { kind: 'claimed', claim };
    return { kind: 'dead_lettered', doc: reclaimed };
  }

  private async claimAmong(names: string[]): Promise<ClaimedJob | null> {
    const reclaimDue = now().getTime() - this.lastReclaimSearchAt >= this.options.pollIntervalMs;
    if (reclaimDue) {
      const reclaimed = await this.reclaimNext(names);
      if (reclaimed) return reclaimed;
    }
    const due = await this.takeNext('pending', names);
    if (due) return due;
    return reclaimDue ? null : this.reclaimNext(names);
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
    if (await this.repository.deadLetter(doc._id, lockId, at)) {
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
   * poll and stall the queue: it is set aside and the step tried again, a bounded number of times per call.
   */
  private async takeNext(source: Source, names: string[]): Promise<ClaimedJob | null> {
    for (let setAside = 0; setAside < MAX_SET_ASIDE_PER_STEP; setAside += 1) {
      const at = now();
      const lockId = this.lockIds.next();
      const until = addMs(at, this.options.leaseMs);
      const scope = this.scope(names);
      try {
        const doc =
          source === 'pending'
            ? await this.repository.claimDue(at, lockId, until, scope)
            : await this.repository.reclaimExpired(at, lockId, until, scope);
        return doc && { doc, lockId };
      } catch (error) {
        if (!isDocumentUpdateError(error)) throw error;
        const probed = await this.probe(source, scope);
        if (probed === 'not_found') throw error;
        if (probed !== 'retry') return probed;
      }
    }
    return null; // progress was made; the next poll sets aside the rest
  }

  /**
   * After a claim the server refused for a document: finds the row that claim would take ('not_found': none, so
   * the refusal was not about a row) and repeats the same update on exactly that row. Success means another row
   * got in front meanwhile (it is ours now); the same refusal confirms the culprit, which is marked `failed` (or, if
   * even that write fails, skipped in memory).
   */
  private async probe(source: Source, scope: ClaimScope): Promise<ClaimedJob | 'retry' | 'not_found'> {
    const at = now();
    const row =
      source === 'pending' ? await this.repository.nextDue(at, scope) : await this.repository.nextExpired(at, scope);
    if (!row) return 'not_found';
    const lockId = this.lockIds.next();
    const until = addMs(at, this.options.leaseMs);
    try {
      const doc =
        source === 'pending'
          ? await this.repository.claimById(row._id, at, lockId, until, scope.names)
          : await this.repository.reclaimById(row._id, at, lockId, until, scope.names);
      return doc ? { doc, lockId } : 'retry'; // the row changed state meanwhile: search again
    } catch (error) {
      if (!isDocumentUpdateError(error)) throw error;
      await this.setAside(source, row, error.message, at);
      return 'retry';
    }
  }

  private async setAside(source: Source, row: { _id: Types.ObjectId; name: string }, cause: string, at: Date) {
    const jobId = row._id.toHexString();
    const reason = `Job could not be ${source === 'pending' ? 'claimed' : 'reclaimed'}: the server rejected the update as stored (${cause})`;
    try {
      if (await this.repository.setAside(row._id, source, reason, at)) {
        this.logger.error(`Job ${jobId} (${row.name}) marked failed: ${reason}`);
        this.events.emit('failed', { jobId, name: row.name, attempt: 0 }, reason);
      }
    } catch (error) {
      this.setAsideIds.add(row._id);
      this.logger.error(
        `Job ${jobId} (${row.name}) is skipped by this worker: ${reason}; marking it failed failed too (${errorInfo(error).message})`,
      );
    }
  }

  private scope(names: string[]): ClaimScope {
    return { names, skipIds: this.setAsideIds.values() };
  }
}
