import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import { JOBS_RESOLVED_OPTIONS, SHUTDOWN_SETTLE_MS, SHUTDOWN_WRITE_MS } from './jobs.constants.js';
import type { ResolvedJobsOptions } from './jobs.options.js';
import { raceTimeout } from './race-timeout.js';

/**
 * The one clock every shutdown step of the module reads, so that `close()` keeps its bound whatever is in flight.
 * Nest calls the shutdown hooks one dependency level at a time (`onModuleDestroy`, then `beforeApplicationShutdown`,
 * then `onApplicationShutdown`), so a wait measured from its own hook's start would add up with the waits before it.
 * The clock starts at the module's first shutdown hook (this provider's `onModuleDestroy`, or whichever step calls
 * `start()` first); each step then gives up at the same instant, `endsAt`.
 */
@Injectable()
export class ShutdownDeadline implements OnModuleDestroy {
  private startedAt: number | undefined;

  constructor(@Inject(JOBS_RESOLVED_OPTIONS) private readonly options: Pick<ResolvedJobsOptions, 'shutdownGraceMs'>) {}

  /** Nest's first shutdown phase: the clock starts before any step of this module waits for anything. */
  onModuleDestroy(): void {
    this.start();
  }

  /** Starts the clock. Idempotent: later calls keep the first start, so every step shares one deadline. */
  start(): void {
    this.startedAt ??= Date.now();
  }

  /** Whether shutdown has begun. */
  get started(): boolean {
    return this.startedAt !== undefined;
  }

  /** Epoch ms at which running handlers are aborted (start + `shutdownGraceMs`); undefined before shutdown. */
  get graceEndsAt(): number | undefined {
    return this.startedAt === undefined ? undefined : this.startedAt + this.options.shutdownGraceMs;
  }

  /**
   * Epoch ms at which every shutdown step gives up, written or not (`graceEndsAt` + `SHUTDOWN_SETTLE_MS` +
   * `SHUTDOWN_WRITE_MS`); undefined before shutdown.
   */
  get endsAt(): number | undefined {
    const graceEndsAt = this.graceEndsAt;
    return graceEndsAt === undefined ? undefined : graceEndsAt + SHUTDOWN_SETTLE_MS + SHUTDOWN_WRITE_MS;
  }

  /**
   * Resolves when `work` settles or at `until` (epoch ms; default and at most `endsAt`), whichever comes first. Never
   * rejects: a step left behind is abandoned, as after a crash. Starts the clock if no hook did yet.
   */
  async settledBy(work: Promise<unknown> | undefined, until?: number): Promise<void> {
    this.start();
    const endsAt = this.endsAt as number;
    const by = Math.min(until ?? endsAt, endsAt);
    await raceTimeout(work?.catch(() => undefined) ?? Promise.resolve(), by - Date.now(), () => undefined);
  }
}
