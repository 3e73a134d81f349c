import { describe, expect, it } from '@jest/globals';
import * as api from '../../../lib';
import { jobErrorStatus } from '../../../lib';

/**
 * The decision for every error class the package exports: an HTTP status, or `undefined` for errors that are not
 * about the request (bootstrap, handler-side), which go on to Nest's default handling. A new exported error class
 * fails the first test until it is decided here and in `lib/http/job-error-status.ts`.
 */
const EXPECTED: Record<string, number | undefined> = {
  // Malformed or unknown id.
  InvalidJobIdError: 404,
  JobNotFoundError: 404,
  // Invalid input.
  InvalidPayloadError: 400,
  InvalidOptionError: 400,
  InvalidCursorError: 400,
  InvalidDurationError: 400,
  UnknownJobError: 400,
  InvalidProgressError: 400,
  // Wrong state or contention: the request was fine, the jobs it touches are not in a state that allows it now.
  DedupeConflictError: 409,
  RetryContendedError: 409,
  JobStateConflictError: 409,
  DedupeKeyContendedError: 409,
  UniqueIndexRejectedJobError: 409,
  // The wait ended before the job did; the job still runs.
  WaitTimeoutError: 504,
  DrainTimeoutError: 504,
  // Bootstrap: the application is misconfigured, never the caller's fault.
  DashboardGuardRequiredError: undefined,
  DuplicateJobHandlerError: undefined,
  IndexConflictError: undefined,
  IndexSetupTimeoutError: undefined,
  JobsModuleImportedTwiceError: undefined,
  MongooseConnectionMissingError: undefined,
  RequestScopedJobHandlerError: undefined,
  // A session enqueue cannot use: the application's code passed it, never the HTTP caller's input.
  InvalidSessionError: undefined,
  // Handler side: reasons a running job stops, not answers to a request.
  JobCancelledError: undefined,
  JobTimeoutError: undefined,
  LeaseLostError: undefined,
  WorkerShutdownError: undefined,
  UnrecoverableJobError: undefined,
  UnstorableResultError: undefined,
  // The base class: a subclass the table does not know is passed on.
  JobsError: undefined,
};

type ErrorClass = abstract new (...args: never[]) => Error;

const exportedErrorClasses = (Object.entries(api) as [string, unknown][]).filter(
  (entry): entry is [string, ErrorClass] => typeof entry[1] === 'function' && entry[1].prototype instanceof Error,
);

/** An instance without running the constructor (each class takes different arguments); only its class matters. */
const instanceOf = (type: ErrorClass): Error => Object.create(type.prototype) as Error;

describe('jobErrorStatus', () => {
  it('has a decision for every error class lib/index exports, and no decision for a class it does not', () => {
    expect(exportedErrorClasses.length).toBeGreaterThan(20);
    expect(exportedErrorClasses.map(([name]) => name).sort()).toEqual(Object.keys(EXPECTED).sort());
  });

  it.each(exportedErrorClasses)('maps %s to its status', (name, type) => {
    expect(jobErrorStatus(instanceOf(type))).toBe(EXPECTED[name]);
  });

  it('maps a subclass like its nearest decided ancestor', () => {
    class TenantIdError extends api.InvalidJobIdError {}
    class AppSpecificJobsError extends api.JobsError {}
    expect(jobErrorStatus(new TenantIdError('x'))).toBe(404);
    expect(jobErrorStatus(new AppSpecificJobsError('x'))).toBeUndefined();
  });

  it('passes on everything that is not one of the library errors, whatever its name says', () => {
    const impostor = Object.assign(new Error('not ours'), { name: 'InvalidJobIdError' });
    for (const value of [new Error('boom'), new TypeError('x'), impostor, 'InvalidJobIdError', null, undefined, {}]) {
      expect(jobErrorStatus(value)).toBeUndefined();
    }
  });
});
