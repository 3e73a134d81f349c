import { Controller, Get } from '@nestjs/common';
import { HealthCheck, HealthCheckService } from '@nestjs/terminus';
import { JobsHealthIndicator } from '../lib/health';

/** GET /health: 200 with `jobs: up` while the worker polls and MongoDB answers; 503 otherwise. */
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly jobs: JobsHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.jobs.isHealthy('jobs')]);
  }
}
