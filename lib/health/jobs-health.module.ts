import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { JobsHealthIndicator } from './jobs.health-indicator.js';

/** Provides `JobsHealthIndicator` (and terminus' `HealthCheckService`) next to a `JobsModule` import. */
@Module({
  imports: [TerminusModule],
  providers: [JobsHealthIndicator],
  exports: [JobsHealthIndicator, TerminusModule],
})
export class JobsHealthModule {}
