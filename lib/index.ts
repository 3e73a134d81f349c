export { MAX_PURGE_LIMIT, type PurgeOptions } from './admin/purge-options.js';
export type { JobsWorker } from './fleet/jobs-worker.js';
export type { JobHandlerDecorator } from './handlers/job-handler.decorator.js';
export { JobHandler } from './handlers/job-handler.decorator.js';
export type { JobHandlerOptions } from './handlers/job-handler.options.js';
export { jobErrorMessage } from './http/job-error-message.js';
export { jobErrorStatus } from './http/job-error-status.js';
export { JobsExceptionFilter } from './http/jobs-exception.filter.js';
export { requireJob } from './http/require-job.js';
export { JobsModule } from './jobs.module.js';
export type { JobsOptionsFactory } from './jobs.module-definition.js';
export { JobsService } from './jobs.service.js';
export type { JobsWorkerStatus } from './liveness/jobs-worker-status.js';
export { MAX_PING_TIMEOUT_MS, type WorkerStatusOptions } from './liveness/worker-status-options.js';
export { DashboardGuardRequiredError } from './model/errors/dashboard-guard-required.error.js';
export { DedupeConflictError } from './model/errors/dedupe-conflict.error.js';
export { DedupeKeyContendedError } from './model/errors/dedupe-key-contended.error.js';
export { type DrainLeftover, DrainTimeoutError } from './model/errors/drain-timeout.error.js';
export { DuplicateJobHandlerError } from './model/errors/duplicate-job-handler.error.js';
export { IndexConflictError } from './model/errors/index-conflict.error.js';
export { IndexSetupTimeoutError } from './model/errors/index-setup-timeout.error.js';
export { InvalidCursorError } from './model/errors/invalid-cursor.error.js';
export { InvalidDurationError } from './model/errors/invalid-duration.error.js';
export { InvalidJobIdError } from './model/errors/invalid-job-id.error.js';
export { InvalidOptionError } from './model/errors/invalid-option.error.js';
export { InvalidPayloadError } from './model/errors/invalid-payload.error.js';
export { InvalidProgressError } from './model/errors/invalid-progress.error.js';
export { InvalidSessionError } from './model/errors/invalid-session.error.js';
export { JobCancelledError } from './model/errors/job-cancelled.error.js';
export { JobNotFoundError } from './model/errors/job-not-found.error.js';
export { JobStateConflictError } from './model/errors/job-state-conflict.error.js';
export { JobTimeoutError } from './model/errors/job-timeout.error.js';
export { JobsError } from './model/errors/jobs.error.js';
export { JobsModuleImportedTwiceError } from './model/errors/jobs-module-imported-twice.error.js';
export { LeaseLostError } from './model/errors/lease-lost.error.js';
export { MongooseConnectionMissingError } from './model/errors/mongoose-connection-missing.error.js';
export { RequestScopedJobHandlerError } from './model/errors/request-scoped-job-handler.error.js';
export { RetryContendedError } from './model/errors/retry-contended.error.js';
export { UniqueIndexRejectedJobError } from './model/errors/unique-index-rejected-job.error.js';
export { UnknownJobError } from './model/errors/unknown-job.error.js';
export { UnrecoverableJobError } from './model/errors/unrecoverable-job.error.js';
export { UnstorableResultError } from './model/errors/unstorable-result.error.js';
export { WaitTimeoutError } from './model/errors/wait-timeout.error.js';
export { WorkerShutdownError } from './model/errors/worker-shutdown.error.js';
export type { JobEvent, JobEventType } from './model/events/job-event.js';
export type { NamePauseEvent, PausedName } from './model/events/name-pause-event.js';
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
} from './model/job-catalogue.js';
export type { JobExecutionContext } from './model/job-execution-context.js';
export type { JobLogLine } from './model/job-log.js';
export type { FinishedStatus, JobAttempt, JobProgress, JobRecord, JobStatus } from './model/job-record.js';
export { JOB_HANDLER_METADATA, MAX_ENQUEUE_ATTEMPTS } from './model/jobs.constants.js';
export type {
  BackoffOptions,
  HandlerRetentionOptions,
  JobsModuleExtras,
  JobsModuleOptions,
  RetentionOptions,
  TelemetryOptions,
} from './model/jobs.options.js';
export type {
  DebounceWindow,
  EnqueuedJobRecord,
  EnqueueItem,
  EnqueueItemOptions,
  EnqueueManyOptions,
  EnqueueOptions,
  EnqueueWindow,
  RunNowConflictReason,
  RunNowOutcome,
} from './model/jobs.types.js';
export type { JobListPage, ListJobsOptions } from './persistence/list-jobs-options.js';
export type { JobMetrics, JobMetricsBucket, JobNameMetrics } from './query/job-metrics.js';
export type { JobMetricsOptions } from './query/job-metrics-options.js';
export type { DrainOptions } from './worker/drain-options.js';
