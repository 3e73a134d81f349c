import { DashboardGuardRequiredError } from '../model/dashboard-guard-required.error.js';
import { DedupeConflictError } from '../model/dedupe-conflict.error.js';
import { DedupeKeyContendedError } from '../model/dedupe-key-contended.error.js';
import { DrainTimeoutError } from '../model/drain-timeout.error.js';
import { DuplicateJobHandlerError } from '../model/duplicate-job-handler.error.js';
import { IndexConflictError } from '../model/index-conflict.error.js';
import { IndexSetupTimeoutError } from '../model/index-setup-timeout.error.js';
import { InvalidCursorError } from '../model/invalid-cursor.error.js';
import { InvalidDurationError } from '../model/invalid-duration.error.js';
import { InvalidJobIdError } from '../model/invalid-job-id.error.js';
import { InvalidOptionError } from '../model/invalid-option.error.js';
import { InvalidPayloadError } from '../model/invalid-payload.error.js';
import { InvalidProgressError } from '../model/invalid-progress.error.js';
import { InvalidSessionError } from '../model/invalid-session.error.js';
import { JobCancelledError } from '../model/job-cancelled.error.js';
import { JobNotFoundError } from '../model/job-not-found.error.js';
import { JobStateConflictError } from '../model/job-state-conflict.error.js';
import { JobTimeoutError } from '../model/job-timeout.error.js';
import { JobsError } from '../model/jobs.error.js';
import { JobsModuleImportedTwiceError } from '../model/jobs-module-imported-twice.error.js';
import { LeaseLostError } from '../model/lease-lost.error.js';
import { MongooseConnectionMissingError } from '../model/mongoose-connection-missing.error.js';
import { RequestScopedJobHandlerError } from '../model/request-scoped-job-handler.error.js';
import { RetryContendedError } from '../model/retry-contended.error.js';
import { UniqueIndexRejectedJobError } from '../model/unique-index-rejected-job.error.js';
import { UnknownJobError } from '../model/unknown-job.error.js';
import { UnrecoverableJobError } from '../model/unrecoverable-job.error.js';
import { UnstorableResultError } from '../model/unstorable-result.error.js';
import { WaitTimeoutError } from '../model/wait-timeout.error.js';
import { WorkerShutdownError } from '../model/worker-shutdown.error.js';

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
