import { hostname } from 'node:os';
import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { JobClaimService } from '../claim/job-claim.service.js';
import { PausedNames } from '../claim/paused-names.js';
import { addMs, now } from '../model/clock.js';
import { errorInfo } from '../model/error-info.js';
import { JOBS_LOGGER_CONTEXT, JOBS_RESOLVED_OPTIONS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { ShutdownDeadline } from '../model/shutdown-deadline.js';
import { LIBRARY_VERSION } from '../model/version.js';
import { WORKER_STATE, type WorkerState } from '../worker/worker-state.js';
import {
  CLEANUP_BATCH_SIZE,
  CLEANUP_EVERY_REFRESHES,
  MISSED_REFRESHES_DELETED,
  MISSED_REFRESHES_GONE,
  presenceRefreshMs,
} from './presence-timing.js';
import { WorkersRepository } from './workers.repository.js';

/**
 * In a worker process, keeps this process's presence document in `<collectionName>_workers` fresh: written at
 * bootstrap (without holding it up) and every refresh interval, removed at shutdown once the worker stopped. Every
 * tenth refresh also deletes documents of processes that died long ago. A failed refresh is logged; the next runs
 * as planned.
 */
@Injectable()
export class WorkerPresenceService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);
  private readonly refreshMs: number;
  private readonly host = hostname();
  private startedAt: Date | undefined;
  private timer: NodeJS.Timeout | undefined;
  private refreshing: Promise<void> | undefined;
  private refreshes = 0;
  private failing = false;
  private stopped = false;

  constructor(
    private readonly repository: WorkersRepository,
    @Inject(WORKER_STATE) private readonly worker: WorkerState,
    private readonly claims: JobClaimService,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
    private readonly deadline: ShutdownDeadline,
    private readonly paused: PausedNames,
  ) {
    this.refreshMs = presenceRefreshMs(options.pollIntervalMs);
  }

  /** Runs after the claim service's and the worker's (it depends on both): the names and the loop are set. */
  onApplicationBootstrap(): void {
    if (!this.options.worker || this.startedAt) return;
    this.startedAt = now();
    // Not awaited: a slow database must not hold up the app's bootstrap for a fleet view.
    this.refresh();
    this.timer = setInterval(() => this.refresh(), this.refreshMs);
    // The presence alone must not keep the process alive.
    this.timer.unref();
  }

  /**
   * Removes the presence document once the worker stopped (it keeps refreshing while running jobs drain, so the
   * worker stays listed meanwhile), by the module's shared shutdown deadline: `close()` keeps its bound. A document
   * left behind (database unreachable) is gone from the fleet view three refresh intervals later.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.deadline.start();
    if (!this.startedAt || this.stopped) return;
    await this.worker.stopped();
    this.stopped = true;
    clearInterval(this.timer);
    const removal = (async () => {
      // A refresh landing after the removal would bring the document back.
      await this.refreshing;
      await this.repository.remove(this.options.workerId);
    })();
    await this.deadline.settledBy(
      removal.catch((error: unknown) =>
        this.logger.warn(
          `Removing the presence of worker ${this.options.workerId} failed: ${errorInfo(error).message}`,
        ),
      ),
    );
  }

  /** One refresh at a time: a slow one makes the next tick skip rather than pile writes up. */
  private refresh(): void {
    if (this.stopped || this.refreshing) return;
    this.refreshing = this.write()
      .then(
        () => {
          if (this.failing) this.logger.log(`Presence of worker ${this.options.workerId} refreshed again`);
          this.failing = false;
        },
        (error: unknown) => {
          // Once per failure streak: a database outage would otherwise log every refresh interval.
          if (!this.failing) {
            this.logger.warn(
              `Refreshing the presence of worker ${this.options.workerId} failed (retried every ${this.refreshMs} ms): ${errorInfo(error).message}`,
            );
          }
          this.failing = true;
        },
      )
      .finally(() => {
        this.refreshing = undefined;
      });
  }

  private async write(): Promise<void> {
    const seenAt = now();
    await this.repository.upsert(this.options.workerId, {
      host: this.host,
      pid: process.pid,
      startedAt: this.startedAt as Date,
      lastSeenAt: seenAt,
      concurrency: this.options.concurrency,
      // Every name run here, also a limited one its claims skip this poll (at its limit, or found empty).
      names: [...this.claims.runNames()].sort(),
      // Absent until this worker read the pauses once: an empty list would say it honours them and none is paused.
      ...(this.paused.known && {
        paused: this.claims
          .runNames()
          .filter((name) => this.paused.has(name))
          .sort(),
      }),
      running: this.worker.pollState().running,
      version: LIBRARY_VERSION,
      refreshIntervalMs: this.refreshMs,
      liveUntil: addMs(seenAt, MISSED_REFRESHES_GONE * this.refreshMs),
      removeAfter: addMs(seenAt, MISSED_REFRESHES_DELETED * this.refreshMs),
    });
    if (this.refreshes++ % CLEANUP_EVERY_REFRESHES === 0) await this.repository.deleteStale(seenAt, CLEANUP_BATCH_SIZE);
  }
}
