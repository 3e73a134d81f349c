import { DashboardGuardRequiredError } from '../model/errors/dashboard-guard-required.error.js';
import { DedupeConflictError } from '../model/errors/dedupe-conflict.error.js';
import { DedupeKeyContendedError } from '../model/errors/dedupe-key-contended.error.js';
import { DrainTimeoutError } from '../model/errors/drain-timeout.error.js';
import { DuplicateJobHandlerError } from '../model/errors/duplicate-job-handler.error.js';
import { IndexConflictError } from '../model/errors/index-conflict.error.js';
import { IndexSetupTimeoutError } from '../model/errors/index-setup-timeout.error.js';
import { InvalidCursorError } from '../model/errors/invalid-cursor.error.js';
import { InvalidDurationError } from '../model/errors/invalid-duration.error.js';
import { InvalidJobIdError } from '../model/errors/invalid-job-id.error.js';
import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { InvalidPayloadError } from '../model/errors/invalid-payload.error.js';
import { InvalidProgressError } from '../model/errors/invalid-progress.error.js';
import { InvalidSessionError } from '../model/errors/invalid-session.error.js';
import { JobCancelledError } from '../model/errors/job-cancelled.error.js';
import { JobNotFoundError } from '../model/errors/job-not-found.error.js';
import { JobStateConflictError } from '../model/errors/job-state-conflict.error.js';
import { JobTimeoutError } from '../model/errors/job-timeout.error.js';
import { JobsError } from '../model/errors/jobs.error.js';
import { JobsModuleImportedTwiceError } from '../model/errors/jobs-module-imported-twice.error.js';
import { LeaseLostError } from '../model/errors/lease-lost.error.js';
import { MongooseConnectionMissingError } from '../model/errors/mongoose-connection-missing.error.js';
import { RequestScopedJobHandlerError } from '../model/errors/request-scoped-job-handler.error.js';
import { RetryContendedError } from '../model/errors/retry-contended.error.js';
import { UniqueIndexRejectedJobError } from '../model/errors/unique-index-rejected-job.error.js';
import { UnknownJobError } from '../model/errors/unknown-job.error.js';
import { UnrecoverableJobError } from '../model/errors/unrecoverable-job.error.js';
import { UnstorableResultError } from '../model/errors/unstorable-result.error.js';
import { WaitTimeoutError } from '../model/errors/wait-timeout.error.js';
import { WorkerShutdownError } from '../model/errors/worker-shutdown.error.js';

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
