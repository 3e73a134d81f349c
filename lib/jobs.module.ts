import { type DynamicModule, Module, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { getConnectionToken } from '@nestjs/mongoose';
import type { Connection } from 'mongoose';
import { JobsAdmin } from './admin/jobs-admin.service.js';
import { RetentionSweeper } from './admin/retention-sweeper.service.js';
import { ClaimsInDoubt } from './claim/claims-in-doubt.js';
import { JobClaimService } from './claim/job-claim.service.js';
import { LimitedClaim } from './claim/limited-claim.js';
import { PausedNames } from './claim/paused-names.js';
import { RateTokensRepository } from './claim/rate-tokens.repository.js';
import { JobDocumentFactory } from './enqueue/job-document.factory.js';
import { JobEnqueuer } from './enqueue/job-enqueuer.service.js';
import { WindowedEnqueue } from './enqueue/windowed-enqueue.js';
import { WorkArrived } from './enqueue/work-arrived.js';
import { JobFinalizer } from './execution/job-finalizer.service.js';
import { WorkerPresenceService } from './fleet/worker-presence.service.js';
import { WorkersRepository } from './fleet/workers.repository.js';
import { JobHandlerRegistry } from './handlers/job-handler.registry.js';
import { JobRetention } from './handlers/job-retention.service.js';
import { JobsExplorer } from './handlers/jobs.explorer.js';
import { JobsMetadataAccessor } from './handlers/jobs-metadata.accessor.js';
import {
  ConfigurableJobsModule,
  JOBS_ASYNC_OPTIONS_TYPE,
  JOBS_MODULE_OPTIONS,
  JOBS_OPTIONS_TYPE,
} from './jobs.module-definition.js';
import { JobsService } from './jobs.service.js';
import { resolveJobsOptions } from './jobs-options.resolver.js';
import { LeaseHeartbeat } from './lease/lease-heartbeat.service.js';
import { JobsWorkerMonitor } from './liveness/jobs-worker.monitor.js';
import { MongooseConnectionMissingError } from './model/errors/mongoose-connection-missing.error.js';
import { JobEvents } from './model/events/job-events.js';
import type { JobDocument } from './model/job-document.js';
import { JOBS_MODEL, JOBS_RESOLVED_OPTIONS } from './model/jobs.constants.js';
import type { JobsModuleOptions, ResolvedJobsOptions } from './model/jobs.options.js';
import { ShutdownDeadline } from './model/shutdown-deadline.js';
import { createJobSchema } from './persistence/job.schema.js';
import { JobIndexes } from './persistence/job-indexes.service.js';
import { JOB_STORES } from './persistence/job-stores.js';
import { PausedNamesStore } from './persistence/paused-names.store.js';
import { JobsQuery } from './query/jobs-query.service.js';
import { JobsCronScheduler } from './schedule/jobs-cron.scheduler.js';
import { jobsTelemetryProvider } from './telemetry/jobs-telemetry.provider.js';
import { JobChangeFeed } from './worker/job-change-feed.js';
import { JobRunner } from './worker/job-runner.service.js';
import { JobWaiter } from './worker/job-waiter.service.js';
import { JobsDrainer } from './worker/jobs-drainer.js';
import { RunNow } from './worker/run-now.service.js';
import { WORKER_STATE } from './worker/worker-state.js';

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
    ...JOB_STORES,
    jobsTelemetryProvider,
    JobIndexes,
    JobRetention,
    RetentionSweeper,
    JobEvents,
    JobHandlerRegistry,
    JobDocumentFactory,
    JobEnqueuer,
    WindowedEnqueue,
    WorkArrived,
    JobsMetadataAccessor,
    JobsExplorer,
    JobClaimService,
    PausedNamesStore,
    PausedNames,
    ClaimsInDoubt,
    LimitedClaim,
    RateTokensRepository,
    LeaseHeartbeat,
    JobFinalizer,
    JobChangeFeed,
    JobRunner,
    { provide: WORKER_STATE, useExisting: JobRunner },
    JobsWorkerMonitor,
    JobsCronScheduler,
    JobWaiter,
    JobsDrainer,
    WorkersRepository,
    WorkerPresenceService,
    JobsQuery,
    JobsAdmin,
    RunNow,
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
