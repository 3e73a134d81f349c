import { Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { JobsService } from '../jobs.service.js';
import type { WorkerStatusOptions } from '../liveness/worker-status-options.js';

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

  /** @throws InvalidOptionError for `options` `workerStatus` refuses (a `timeoutMs` not in (0, 60,000], say). */
  async isHealthy<const Key extends string = 'jobs'>(key: Key = 'jobs' as Key, options: WorkerStatusOptions = {}) {
    const { status, ...facts } = await this.jobs.workerStatus(options);
    const details = {
      ...facts,
      lastPollAt: facts.lastPollAt?.toISOString() ?? null,
    };
    const session = this.health.check(key);
    return status === 'up' ? session.up(details) : session.down(details);
  }
}
