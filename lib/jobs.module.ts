import { type DynamicModule, Module, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { getConnectionToken } from '@nestjs/mongoose';
import type { Connection } from 'mongoose';
import { ClaimsInDoubt } from './claim/claims-in-doubt';
import { JobClaimService } from './claim/job-claim.service';
import { JobHandlerRegistry } from './discovery/job-handler.registry';
import { JobsExplorer } from './discovery/jobs.explorer';
import { JobsMetadataAccessor } from './discovery/jobs-metadata.accessor';
import { JobDocumentFactory } from './enqueue/job-document.factory';
import { JobEnqueuer } from './enqueue/job-enqueuer.service';
import { MongooseConnectionMissingError } from './errors/mongoose-connection-missing.error';
import { JobEvents } from './events/job-events';
import { JobFinalizer } from './execution/job-finalizer.service';
import { JobRunner } from './execution/job-runner.service';
import { WorkerPresenceService } from './fleet/worker-presence.service';
import { WorkersRepository } from './fleet/workers.repository';
import { JOBS_MODEL, JOBS_RESOLVED_OPTIONS } from './jobs.constants';
import {
  ConfigurableJobsModule,
  JOBS_ASYNC_OPTIONS_TYPE,
  JOBS_MODULE_OPTIONS,
  JOBS_OPTIONS_TYPE,
} from './jobs.module-definition';
import type { JobsModuleOptions, ResolvedJobsOptions } from './jobs.options';
import { JobsService } from './jobs.service';
import { resolveJobsOptions } from './jobs-options.resolver';
import { LeaseHeartbeat } from './lease/lease-heartbeat.service';
import { LimitedClaim } from './limits/limited-claim';
import { RateTokensRepository } from './limits/rate-tokens.repository';
import { JobsWorkerMonitor } from './liveness/jobs-worker.monitor';
import { createJobSchema, type JobDocument } from './persistence/job.schema';
import { JobIndexes } from './persistence/job-indexes.service';
import { JobsRepository } from './persistence/jobs.repository';
import { JobRetention } from './retention/job-retention.service';
import { RetentionSweeper } from './retention/retention-sweeper.service';
import { JobsCronScheduler } from './schedule/jobs-cron.scheduler';
import { ShutdownDeadline } from './shutdown/shutdown-deadline';
import { jobsTelemetryProvider } from './telemetry/jobs-telemetry.provider';
import { JobWaiter } from './waiting/job-waiter.service';
import { JobsDrainer } from './waiting/jobs-drainer';

/**
 * Durable MongoDB-backed jobs. Import once, after `MongooseModule.forRoot()`; `JobsService` is then
 * injectable everywhere (the module is global).
 *
 * @example
 * ```ts
 * @Module({
 *   imports: [
 *     MongooseModule.forRoot(process.env.MONGODB_URI!),
 *     JobsModule.forRoot({ concurrency: 8 }),
 *   ],
 *   providers: [EmailJobs],
 * })
 * export class AppModule {}
 * ```
 */
@Module({})
export class JobsModule extends ConfigurableJobsModule {
  // `super` (not the base class name) so the returned definition's `module` is JobsModule.
  static forRoot(options: typeof JOBS_OPTIONS_TYPE = {}): DynamicModule {
    return withJobsProviders(super.forRoot(options), options.connectionName);
  }

  static forRootAsync(options: typeof JOBS_ASYNC_OPTIONS_TYPE): DynamicModule {
    return withJobsProviders(super.forRootAsync(options), options.connectionName);
  }
}

function withJobsProviders(definition: DynamicModule, connectionName: string | undefined): DynamicModule {
  const providers: Provider[] = [
    {
      provide: JOBS_RESOLVED_OPTIONS,
      inject: [JOBS_MODULE_OPTIONS],
      useFactory: (options: JobsModuleOptions) => resolveJobsOptions(options),
    },
    {
      provide: JOBS_MODEL,
      // Optional, so a missing connection fails with what to import instead of Nest's error about an internal token.
      inject: [{ token: getConnectionToken(connectionName), optional: true }, JOBS_RESOLVED_OPTIONS],
      useFactory: (connection: Connection | undefined, options: ResolvedJobsOptions) => {
        if (!connection) throw new MongooseConnectionMissingError(connectionName);
        const modelName = `NestjsMongoJobs:${options.collectionName}`;
        return (
          connection.models[modelName] ??
          connection.model<JobDocument>(modelName, createJobSchema(options.collectionName), options.collectionName)
        );
      },
    },
    ShutdownDeadline,
    JobsRepository,
    jobsTelemetryProvider,
    JobIndexes,
    JobRetention,
    RetentionSweeper,
    JobEvents,
    JobHandlerRegistry,
    JobDocumentFactory,
    JobEnqueuer,
    JobsMetadataAccessor,
    JobsExplorer,
    JobClaimService,
    ClaimsInDoubt,
    LimitedClaim,
    RateTokensRepository,
    LeaseHeartbeat,
    JobFinalizer,
    JobRunner,
    JobsWorkerMonitor,
    JobsCronScheduler,
    JobWaiter,
    JobsDrainer,
    WorkersRepository,
    WorkerPresenceService,
    JobsService,
  ];
  return {
    ...definition,
    global: true,
    imports: [...(definition.imports ?? []), DiscoveryModule],
    providers: [...(definition.providers ?? []), ...providers],
    exports: [...(definition.exports ?? []), JobsService],
  };
}
