import { DashboardGuardRequiredError } from '../errors/dashboard-guard-required.error.js';
import { DedupeConflictError } from '../errors/dedupe-conflict.error.js';
import { DedupeKeyContendedError } from '../errors/dedupe-key-contended.error.js';
import { DrainTimeoutError } from '../errors/drain-timeout.error.js';
import { DuplicateJobHandlerError } from '../errors/duplicate-job-handler.error.js';
import { IndexConflictError } from '../errors/index-conflict.error.js';
import { IndexSetupTimeoutError } from '../errors/index-setup-timeout.error.js';
import { InvalidCursorError } from '../errors/invalid-cursor.error.js';
import { InvalidDurationError } from '../errors/invalid-duration.error.js';
import { InvalidJobIdError } from '../errors/invalid-job-id.error.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { InvalidPayloadError } from '../errors/invalid-payload.error.js';
import { InvalidProgressError } from '../errors/invalid-progress.error.js';
import { InvalidSessionError } from '../errors/invalid-session.error.js';
import { JobCancelledError } from '../errors/job-cancelled.error.js';
import { JobNotFoundError } from '../errors/job-not-found.error.js';
import { JobStateConflictError } from '../errors/job-state-conflict.error.js';
import { JobTimeoutError } from '../errors/job-timeout.error.js';
import { JobsError } from '../errors/jobs.error.js';
import { JobsModuleImportedTwiceError } from '../errors/jobs-module-imported-twice.error.js';
import { LeaseLostError } from '../errors/lease-lost.error.js';
import { MongooseConnectionMissingError } from '../errors/mongoose-connection-missing.error.js';
import { RequestScopedJobHandlerError } from '../errors/request-scoped-job-handler.error.js';
import { RetryContendedError } from '../errors/retry-contended.error.js';
import { UniqueIndexRejectedJobError } from '../errors/unique-index-rejected-job.error.js';
import { UnknownJobError } from '../errors/unknown-job.error.js';
import { UnrecoverableJobError } from '../errors/unrecoverable-job.error.js';
import { UnstorableResultError } from '../errors/unstorable-result.error.js';
import { WaitTimeoutError } from '../errors/wait-timeout.error.js';
import { WorkerShutdownError } from '../errors/worker-shutdown.error.js';

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
