export type { JobHandlerDecorator } from './decorators/job-handler.decorator';
export { JobHandler } from './decorators/job-handler.decorator';
export type { JobHandlerOptions } from './decorators/job-handler.options';
export { DashboardGuardRequiredError } from './errors/dashboard-guard-required.error';
export { DedupeConflictError } from './errors/dedupe-conflict.error';
export { DedupeKeyContendedError } from './errors/dedupe-key-contended.error';
export { type DrainLeftover, DrainTimeoutError } from './errors/drain-timeout.error';
export { DuplicateJobHandlerError } from './errors/duplicate-job-handler.error';
export { IndexConflictError } from './errors/index-conflict.error';
export { IndexSetupTimeoutError } from './errors/index-setup-timeout.error';
export { InvalidCursorError } from './errors/invalid-cursor.error';
export { InvalidDurationError } from './errors/invalid-duration.error';
export { InvalidJobIdError } from './errors/invalid-job-id.error';
export { InvalidOptionError } from './errors/invalid-option.error';
export { InvalidPayloadError } from './errors/invalid-payload.error';
export { InvalidProgressError } from './errors/invalid-progress.error';
export { InvalidSessionError } from './errors/invalid-session.error';
export { JobCancelledError } from './errors/job-cancelled.error';
export { JobNotFoundError } from './errors/job-not-found.error';
export { JobStateConflictError } from './errors/job-state-conflict.error';
export { JobTimeoutError } from './errors/job-timeout.error';
export { JobsError } from './errors/jobs.error';
export { JobsModuleImportedTwiceError } from './errors/jobs-module-imported-twice.error';
export { LeaseLostError } from './errors/lease-lost.error';
export { MongooseConnectionMissingError } from './errors/mongoose-connection-missing.error';
export { RequestScopedJobHandlerError } from './errors/request-scoped-job-handler.error';
export { RetryContendedError } from './errors/retry-contended.error';
export { UniqueIndexRejectedJobError } from './errors/unique-index-rejected-job.error';
export { UnknownJobError } from './errors/unknown-job.error';
export { UnrecoverableJobError } from './errors/unrecoverable-job.error';
export { UnstorableResultError } from './errors/unstorable-result.error';
export { WaitTimeoutError } from './errors/wait-timeout.error';
export { WorkerShutdownError } from './errors/worker-shutdown.error';
export type { JobEvent, JobEventType } from './events/job-event';
export type { JobsWorker } from './fleet/jobs-worker';
export { jobErrorMessage } from './http/job-error-message';
export { jobErrorStatus } from './http/job-error-status';
export { JobsExceptionFilter } from './http/jobs-exception.filter';
export { requireJob } from './http/require-job';
export { JOB_HANDLER_METADATA, MAX_ENQUEUE_ATTEMPTS } from './jobs.constants';
export { JobsModule } from './jobs.module';
export type { JobsOptionsFactory } from './jobs.module-definition';
export type {
  BackoffOptions,
  HandlerRetentionOptions,
  JobsModuleExtras,
  JobsModuleOptions,
  RetentionOptions,
  TelemetryOptions,
} from './jobs.options';
export { JobsService } from './jobs.service';
export type {
  EnqueuedJobRecord,
  EnqueueItem,
  EnqueueItemOptions,
  EnqueueManyOptions,
  EnqueueOptions,
  RunNowConflictReason,
  RunNowOutcome,
} from './jobs.types';
export type { JobsWorkerStatus } from './liveness/jobs-worker-status';
export { MAX_PING_TIMEOUT_MS, type WorkerStatusOptions } from './liveness/worker-status-options';
export type { FinishedStatus, JobAttempt, JobProgress, JobRecord, JobStatus } from './persistence/job.types';
export type { JobMetrics, JobMetricsBucket, JobNameMetrics } from './query/job-metrics';
export type { JobMetricsOptions } from './query/job-metrics-options';
export type { JobListPage, ListJobsOptions } from './query/list-jobs-options';
export { MAX_PURGE_LIMIT, type PurgeOptions } from './retention/purge-options';
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
} from './types/job-catalogue';
export type { JobExecutionContext } from './types/job-execution-context';
export type { DrainOptions } from './waiting/drain-options';
