import { HttpStatus } from '@nestjs/common';
import { DashboardGuardRequiredError } from '../model/errors/dashboard-guard-required.error.js';
import { DedupeConflictError } from '../model/errors/dedupe-conflict.error.js';
import { DedupeKeyContendedError } from '../model/errors/dedupe-key-contended.error.js';
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

type JobsErrorClass = abstract new (...args: never[]) => JobsError;

/**
 * The one table of library error → HTTP status, for every HTTP surface (the exception filter, the dashboard API).
 * `undefined` means "not about the request": such errors go on to the application's default handling (500).
 */
const STATUS_BY_ERROR = new Map<JobsErrorClass, HttpStatus | undefined>([
  // Malformed or unknown id: to the caller, an id that cannot exist and one that does not are the same thing.
  [InvalidJobIdError, HttpStatus.NOT_FOUND],
  [JobNotFoundError, HttpStatus.NOT_FOUND],
  // Invalid input: fixing the request fixes it.
  [InvalidPayloadError, HttpStatus.BAD_REQUEST],
  [InvalidOptionError, HttpStatus.BAD_REQUEST],
  [InvalidCursorError, HttpStatus.BAD_REQUEST],
  [InvalidDurationError, HttpStatus.BAD_REQUEST],
  [UnknownJobError, HttpStatus.BAD_REQUEST],
  [InvalidProgressError, HttpStatus.BAD_REQUEST],
  // Wrong state or contention: a valid request that the jobs stored right now do not allow; nothing was written.
  // Another job holds the dedupe key: retry after it finishes or is cancelled.
  [DedupeConflictError, HttpStatus.CONFLICT],
  // The job (or its key) kept changing under concurrent writers: the same request may succeed when sent again.
  [RetryContendedError, HttpStatus.CONFLICT],
  // A retry or cancel the job's current status does not allow (the dashboard's rule).
  [JobStateConflictError, HttpStatus.CONFLICT],
  [DedupeKeyContendedError, HttpStatus.CONFLICT],
  // An application's unique index already holds a job with the same value: a clash with stored data, as 409 means.
  [UniqueIndexRejectedJobError, HttpStatus.CONFLICT],
  // A wait that ended before the job did: the request was fine and the job still runs; nothing failed except the
  // wait, as with a gateway whose upstream did not answer in time. Waiting again may succeed.
  [WaitTimeoutError, HttpStatus.GATEWAY_TIMEOUT],
  // Bootstrap errors: a misconfigured application, never the caller's fault.
  [DashboardGuardRequiredError, undefined],
  [DuplicateJobHandlerError, undefined],
  [IndexConflictError, undefined],
  [IndexSetupTimeoutError, undefined],
  [JobsModuleImportedTwiceError, undefined],
  [MongooseConnectionMissingError, undefined],
  [RequestScopedJobHandlerError, undefined],
  // A session enqueue cannot use is the application's code's mistake, never the HTTP caller's input.
  [InvalidSessionError, undefined],
  // Handler-side reasons a running job stops; one that reaches a request is a server bug.
  [JobCancelledError, undefined],
  [JobTimeoutError, undefined],
  [LeaseLostError, undefined],
  [WorkerShutdownError, undefined],
  [UnrecoverableJobError, undefined],
  [UnstorableResultError, undefined],
]);

/**
 * The HTTP status that answers a library error (a subclass answers like its nearest listed ancestor), or `undefined`
 * for anything else: errors that are not about the request, and every error this library did not throw.
 * @example jobErrorStatus(new InvalidJobIdError('x')) // 404
 */
export function jobErrorStatus(error: unknown): HttpStatus | undefined {
  if (!(error instanceof JobsError)) return undefined;
  // Prototypes, not `error.constructor`: an own `constructor` property could otherwise loop or lie.
  for (let proto = Object.getPrototypeOf(error); proto !== null; proto = Object.getPrototypeOf(proto)) {
    const type = proto.constructor as JobsErrorClass;
    if (STATUS_BY_ERROR.has(type)) return STATUS_BY_ERROR.get(type);
  }
  return undefined;
}
