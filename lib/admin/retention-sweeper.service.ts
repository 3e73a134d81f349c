import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { JobRetention } from '../handlers/job-retention.service.js';
import { now } from '../model/clock.js';
import { errorInfo } from '../model/error-info.js';
import { JOBS_LOGGER_CONTEXT, JOBS_RESOLVED_OPTIONS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { ShutdownDeadline } from '../model/shutdown-deadline.js';
import { JobRetentionStore } from '../persistence/job-retention.store.js';

/** Rows one delete removes at most: a short command on any server, however large the backlog. */
export const SWEEP_BATCH_SIZE = 1_000;
/** Batches one sweep deletes at most; a larger backlog is left to the next sweeps, so no sweep holds the server long. */
const SWEEP_MAX_BATCHES = 5;

/**
 * In worker processes, deletes finished jobs whose `expiresAt` has passed, every `retention.sweepIntervalMs`.
 * Several processes sweeping one collection at once is harmless (a row is deleted once; the others find fewer).
 * A failed sweep is logged and the next one runs as planned.
 */
@Injectable()
export class RetentionSweeper implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly store: JobRetentionStore,
    private readonly retention: JobRetention,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
    private readonly deadline: ShutdownDeadline,
  ) {}

  /** Handlers (and their retention) are registered by now. Nothing to sweep for when nothing here stamps an expiry. */
  onApplicationBootstrap(): void {
    if (this.options.worker && this.retention.stampsAny()) this.scheduleNext();
  }

  /**
   * Stops sweeping, and waits for a sweep under way (mongoose closes the connection after this hook) at most until the
   * module's shared shutdown deadline: this hook runs after the runner's, so a wait of its own would add to theirs.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.deadline.start();
    this.stopped = true;
    clearTimeout(this.timer);
    await this.deadline.settledBy(this.sweeping);
  }

  /** One sweep: deletes expired rows batch by batch, at most a few batches. Resolves how many it deleted. */
  async sweep(): Promise<number> {
    let deleted = 0;
    for (let batch = 0; batch < SWEEP_MAX_BATCHES && !this.stopped; batch += 1) {
      const result = await this.store.deleteExpired(now(), SWEEP_BATCH_SIZE);
      deleted += result.deleted;
      if (result.found < SWEEP_BATCH_SIZE) break;
    }
    return deleted;
  }

  private scheduleNext(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.sweeping = this.sweep()
        .then(
          () => undefined,
          (error: unknown) => this.logger.warn(`Deleting expired jobs failed: ${errorInfo(error).message}`),
        )
        .finally(() => {
          this.sweeping = undefined;
          this.scheduleNext();
        });
    }, this.options.retention.sweepIntervalMs);
    // A pending sweep alone must not keep the process alive.
    this.timer.unref();
  }
}
