import { DashboardGuardRequiredError } from '../errors/dashboard-guard-required.error';
import { DedupeConflictError } from '../errors/dedupe-conflict.error';
import { DedupeKeyContendedError } from '../errors/dedupe-key-contended.error';
import { DrainTimeoutError } from '../errors/drain-timeout.error';
import { DuplicateJobHandlerError } from '../errors/duplicate-job-handler.error';
import { IndexConflictError } from '../errors/index-conflict.error';
import { IndexSetupTimeoutError } from '../errors/index-setup-timeout.error';
import { InvalidCursorError } from '../errors/invalid-cursor.error';
import { InvalidDurationError } from '../errors/invalid-duration.error';
import { InvalidJobIdError } from '../errors/invalid-job-id.error';
import { InvalidOptionError } from '../errors/invalid-option.error';
import { InvalidPayloadError } from '../errors/invalid-payload.error';
import { InvalidProgressError } from '../errors/invalid-progress.error';
import { InvalidSessionError } from '../errors/invalid-session.error';
import { JobCancelledError } from '../errors/job-cancelled.error';
import { JobNotFoundError } from '../errors/job-not-found.error';
import { JobStateConflictError } from '../errors/job-state-conflict.error';
import { JobTimeoutError } from '../errors/job-timeout.error';
import { JobsError } from '../errors/jobs.error';
import { JobsModuleImportedTwiceError } from '../errors/jobs-module-imported-twice.error';
import { LeaseLostError } from '../errors/lease-lost.error';
import { MongooseConnectionMissingError } from '../errors/mongoose-connection-missing.error';
import { RequestScopedJobHandlerError } from '../errors/request-scoped-job-handler.error';
import { RetryContendedError } from '../errors/retry-contended.error';
import { UniqueIndexRejectedJobError } from '../errors/unique-index-rejected-job.error';
import { UnknownJobError } from '../errors/unknown-job.error';
import { UnrecoverableJobError } from '../errors/unrecoverable-job.error';
import { UnstorableResultError } from '../errors/unstorable-result.error';
import { WaitTimeoutError } from '../errors/wait-timeout.error';
import { WorkerShutdownError } from '../errors/worker-shutdown.error';

/**
 * The `error.type` values metrics may carry: every error class of this library, the JavaScript built-ins, the MongoDB
 * driver's usual ones, and `NonError` (a thrown non-Error). Any other class name (an app's own, one made at run time)
 * is reported as `_other`: each value is one more series per metric. Spans and stored attempts keep the real name.
 */
export const KNOWN_ERROR_TYPES: ReadonlySet<string> = new Set([
  ...[
    DashboardGuardRequiredError,
    DedupeConflictError,
    DedupeKeyContendedError,
    DrainTimeoutError,
    DuplicateJobHandlerError,
    IndexConflictError,
    IndexSetupTimeoutError,
    InvalidCursorError,
    InvalidDurationError,
    InvalidJobIdError,
    InvalidOptionError,
    InvalidPayloadError,
    InvalidProgressError,
    InvalidSessionError,
    JobCancelledError,
    JobNotFoundError,
    JobStateConflictError,
    JobTimeoutError,
    JobsModuleImportedTwiceError,
    JobsError,
    LeaseLostError,
    MongooseConnectionMissingError,
    RequestScopedJobHandlerError,
    RetryContendedError,
    UniqueIndexRejectedJobError,
    UnknownJobError,
    UnrecoverableJobError,
    UnstorableResultError,
    WaitTimeoutError,
    WorkerShutdownError,
  ].map((errorClass) => errorClass.name),
  'Error',
  'AggregateError',
  'EvalError',
  'RangeError',
  'ReferenceError',
  'SyntaxError',
  'TypeError',
  'URIError',
  'AbortError',
  'TimeoutError',
  'NonError',
  'MongoError',
  'MongoServerError',
  'MongoNetworkError',
  'MongoNetworkTimeoutError',
  'MongoServerSelectionError',
  'MongoBulkWriteError',
  'MongoWriteConcernError',
]);
