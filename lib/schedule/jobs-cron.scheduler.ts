import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  Optional,
} from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { CronJob } from 'cron';
import { JobEnqueuer } from '../enqueue/job-enqueuer.service.js';
import type { CronSchedule } from '../handlers/cron-schedule.js';
import { JobHandlerRegistry } from '../handlers/job-handler.registry.js';
import type { RegisteredJobHandler } from '../handlers/registered-job-handler.js';
import { CRON_CATCH_UP_WINDOW_MS, isPastCatchUpWindow } from '../model/catch-up-window.js';
import { now } from '../model/clock.js';
import { errorInfo } from '../model/error-info.js';
import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { JOBS_LOGGER_CONTEXT } from '../model/jobs.constants.js';
import { HOUR_MS } from '../model/time-units.js';
import { CronTicker } from './cron-ticker.js';
import { ZonedCronTime } from './zoned-cron-time.js';

/**
 * Registers a `@nestjs/schedule` cron job per `@JobHandler({ cron })`. On every tick, every instance tries to
 * insert that tick's job under `cron:<name>:<tick ISO>` (a unique key that is never released; `JobEnqueuer`), so at
 * most one job exists per tick, however many instances run and however late one of them fires. Ticks follow `CronSchedule`'s
 * clock-change rules. A fire that comes after several ticks fell due enqueues the latest and logs the rest: a tick
 * that no instance fired has no job. A tick older than `CRON_CATCH_UP_WINDOW_MS` is never enqueued (its row may be
 * gone already, and with it the proof that it ran). Schedules were validated when the handlers were registered.
 */
@Injectable()
export class JobsCronScheduler implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);
  private readonly names: string[] = [];

  constructor(
    private readonly handlers: JobHandlerRegistry,
    // Provided by the app's ScheduleModule.forRoot(). We do not import it ourselves: a second forRoot() would
    // start a second orchestrator and run the app's own @Cron methods twice.
    @Optional() @Inject(SchedulerRegistry) private readonly schedulerRegistry: SchedulerRegistry | null,
    private readonly enqueuer: JobEnqueuer,
  ) {}

  onApplicationBootstrap(): void {
    const scheduled = this.handlers.all().filter((handler) => handler.schedule);
    if (scheduled.length === 0) return;
    const registry = this.schedulerRegistry;
    if (!registry) {
      const handler = scheduled[0];
      throw new InvalidOptionError(
        `@JobHandler('${handler.name}').cron on ${handler.site}`,
        handler.schedule?.expression,
        'needs ScheduleModule.forRoot() from @nestjs/schedule in the application imports',
      );
    }
    for (const handler of scheduled) {
      if (handler.schedule) this.start(registry, handler, handler.schedule);
    }
  }

  /** Stops scheduling before the worker drains, so shutdown enqueues nothing new. */
  beforeApplicationShutdown(): void {
    const registry = this.schedulerRegistry;
    for (const name of this.names.splice(0)) {
      if (registry?.doesExist('cron', name)) registry.deleteCronJob(name);
    }
  }

  /**
   * Enqueues the job of one tick unless it exists already, or the tick is older than the catch-up window (logged).
   * Resolves true when this call created it. Public so a late or repeated tick can be replayed (tests, catch-up
   * tooling).
   */
  async enqueueTick(handler: RegisteredJobHandler, tick: Date): Promise<boolean> {
    if (isPastCatchUpWindow(tick, now())) {
      this.logger.warn(
        `${handler.name}: not enqueueing the tick of ${tick.toISOString()}: it is older than the catch-up window ` +
          `(${CRON_CATCH_UP_WINDOW_MS / HOUR_MS} h)`,
      );
      return false;
    }
    return this.enqueuer.enqueueTick(handler.name, tick);
  }

  private start(registry: SchedulerRegistry, handler: RegisteredJobHandler, schedule: CronSchedule): void {
    const ticker = new CronTicker(schedule, now());
    const job = CronJob.from({
      cronTime: schedule.expression,
      timeZone: schedule.timeZone,
      start: false,
      onTick: () => this.onTimer(handler, ticker),
    });
    // Our tick math drives cron's timer (and what apps read from nextDate()); cron's own mishandles clock changes.
    job.setTime(new ZonedCronTime(schedule));
    const name = `nestjs-mongo-jobs:${handler.name}`;
    registry.addCronJob(name, job);
    this.names.push(name);
    job.start();
    this.logger.log(`Scheduled ${handler.name} (${schedule.expression}, ${schedule.timeZone})`);
  }

  private onTimer(handler: RegisteredJobHandler, ticker: CronTicker): void {
    const due = ticker.fire(now());
    if (!due) return;
    const { tick, missed } = due;
    if (missed) {
      this.logger.warn(
        `${handler.name}: this instance missed ${missed.count} tick(s) from ${missed.from.toISOString()} to ` +
          `${missed.to.toISOString()} (timer late); enqueueing only the latest, ${tick.toISOString()}. ` +
          'Another instance may have enqueued the missed ones.',
      );
    }
    this.enqueueTick(handler, tick).catch((error: unknown) => {
      this.logger.error(`Enqueueing ${handler.name} for ${tick.toISOString()} failed: ${errorInfo(error).message}`);
    });
  }
}
