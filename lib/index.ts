export type { JobHandlerDecorator } from './decorators/job-handler.decorator.js';
export { JobHandler } from './decorators/job-handler.decorator.js';
export type { JobHandlerOptions } from './decorators/job-handler.options.js';
export { DashboardGuardRequiredError } from './errors/dashboard-guard-required.error.js';
export { DedupeConflictError } from './errors/dedupe-conflict.error.js';
export { DedupeKeyContendedError } from './errors/dedupe-key-contended.error.js';
export { type DrainLeftover, DrainTimeoutError } from './errors/drain-timeout.error.js';
export { DuplicateJobHandlerError } from './errors/duplicate-job-handler.error.js';
export { IndexConflictError } from './errors/index-conflict.error.js';
export { IndexSetupTimeoutError } from './errors/index-setup-timeout.error.js';
export { InvalidCursorError } from './errors/invalid-cursor.error.js';
export { InvalidDurationError } from './errors/invalid-duration.error.js';
export { InvalidJobIdError } from './errors/invalid-job-id.error.js';
export { InvalidOptionError } from './errors/invalid-option.error.js';
export { InvalidPayloadError } from './errors/invalid-payload.error.js';
export { InvalidProgressError } from './errors/invalid-progress.error.js';
export { InvalidSessionError } from './errors/invalid-session.error.js';
export { JobCancelledError } from './errors/job-cancelled.error.js';
export { JobNotFoundError } from './errors/job-not-found.error.js';
export { JobStateConflictError } from './errors/job-state-conflict.error.js';
export { JobTimeoutError } from './errors/job-timeout.error.js';
export { JobsError } from './errors/jobs.error.js';
export { JobsModuleImportedTwiceError } from './errors/jobs-module-imported-twice.error.js';
export { LeaseLostError } from './errors/lease-lost.error.js';
export { MongooseConnectionMissingError } from './errors/mongoose-connection-missing.error.js';
export { RequestScopedJobHandlerError } from './errors/request-scoped-job-handler.error.js';
export { RetryContendedError } from './errors/retry-contended.error.js';
export { UniqueIndexRejectedJobError } from './errors/unique-index-rejected-job.error.js';
export { UnknownJobError } from './errors/unknown-job.error.js';
export { UnrecoverableJobError } from './errors/unrecoverable-job.error.js';
export { UnstorableResultError } from './errors/unstorable-result.error.js';
export { WaitTimeoutError } from './errors/wait-timeout.error.js';
export { WorkerShutdownError } from './errors/worker-shutdown.error.js';
export type { JobEvent, JobEventType } from './events/job-event.js';
export type { JobsWorker } from './fleet/jobs-worker.js';
export { jobErrorMessage } from './http/job-error-message.js';
export { jobErrorStatus } from './http/job-error-status.js';
export { JobsExceptionFilter } from './http/jobs-exception.filter.js';
export { requireJob } from './http/require-job.js';
export { JOB_HANDLER_METADATA, MAX_ENQUEUE_ATTEMPTS } from './jobs.constants.js';
export { JobsModule } from './jobs.module.js';
export type { JobsOptionsFactory } from './jobs.module-definition.js';
export type {
  BackoffOptions,
  HandlerRetentionOptions,
  JobsModuleExtras,
  JobsModuleOptions,
  RetentionOptions,
  TelemetryOptions,
} from './jobs.options.js';
export { JobsService } from './jobs.service.js';
export type {
  EnqueuedJobRecord,
  EnqueueItem,
  EnqueueItemOptions,
  EnqueueManyOptions,
  EnqueueOptions,
  RunNowConflictReason,
  RunNowOutcome,
} from './jobs.types.js';
export type { JobsWorkerStatus } from './liveness/jobs-worker-status.js';
export { MAX_PING_TIMEOUT_MS, type WorkerStatusOptions } from './liveness/worker-status-options.js';
export type { FinishedStatus, JobAttempt, JobProgress, JobRecord, JobStatus } from './persistence/job.types.js';
export type { JobMetrics, JobMetricsBucket, JobNameMetrics } from './query/job-metrics.js';
export type { JobMetricsOptions } from './query/job-metrics-options.js';
export type { JobListPage, ListJobsOptions } from './query/list-jobs-options.js';
export { MAX_PURGE_LIMIT, type PurgeOptions } from './retention/purge-options.js';
export type {
  CatalogueEnqueueArgs,
  CatalogueEnqueueItem,
  DeclaredJobName,
  EnqueueManyItems,
  JobName,
  JobPayload,
  JobPayloads,
  JobResult,
  JobResults,
  StoredPayload,
  UncataloguedEnqueueArgs,
  UncataloguedEnqueueItem,
  UncataloguedEnqueueOptions,
  UncataloguedJobName,
} from './types/job-catalogue.js';
export type { JobExecutionContext } from './types/job-execution-context.js';
export type { DrainOptions } from './waiting/drain-options.js';
