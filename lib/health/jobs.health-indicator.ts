import { Injectable } from '@nestjs/common';
import { type HealthIndicatorResult, HealthIndicatorService } from '@nestjs/terminus';
import { JobsService } from '../jobs.service.js';
import type { JobsWorkerStatus } from '../liveness/jobs-worker-status.js';
import type { WorkerStatusOptions } from '../liveness/worker-status-options.js';

/** What a health check reports under its key besides `status`: the worker's status facts, `lastPollAt` as ISO text. */
export type JobsHealthDetails = Omit<JobsWorkerStatus, 'status' | 'lastPollAt'> & { lastPollAt: string | null };

/**
 * Worker liveness for `@nestjs/terminus` (import from `nestjs-mongo-jobs/health`, so apps without terminus never
 * load it). `up` when the database answers a ping and, in a worker process, the poll loop is polling on schedule.
 *
 * @example
 * ```ts
 * @Controller('health')
 * export class HealthController {
 *   constructor(private readonly health: HealthCheckService, private readonly jobs: JobsHealthIndicator) {}
 *
 *   @Get() @HealthCheck()
 *   check() {
 *     return this.health.check([() => this.jobs.isHealthy('jobs')]);
 *   }
 * }
 * ```
 */
@Injectable()
export class JobsHealthIndicator {
  constructor(
    private readonly jobs: JobsService,
    private readonly health: HealthIndicatorService,
  ) {}

  // The return type is annotated, not inferred: an inferred terminus type is written into the CommonJS declarations
  // with an import attribute (`resolution-mode`) that TypeScript before 5.3 cannot read.
  /** @throws InvalidOptionError for `options` `workerStatus` refuses (a `timeoutMs` not in (0, 60,000], say). */
  async isHealthy<const Key extends string = 'jobs'>(
    key: Key = 'jobs' as Key,
    options: WorkerStatusOptions = {},
  ): Promise<
    HealthIndicatorResult<Key, 'up', JobsHealthDetails> | HealthIndicatorResult<Key, 'down', JobsHealthDetails>
  > {
    const { status, ...facts } = await this.jobs.workerStatus(options);
    const details: JobsHealthDetails = {
      ...facts,
      lastPollAt: facts.lastPollAt?.toISOString() ?? null,
    };
    const session = this.health.check(key);
    return status === 'up' ? session.up(details) : session.down(details);
  }
}
