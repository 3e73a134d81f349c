import type { JobHandlerMetadata } from '../decorators/job-handler.options';
import { InvalidOptionError } from '../errors/invalid-option.error';
import { MAX_JOB_NAME_LENGTH } from '../jobs.constants';
import type { ResolvedJobsOptions } from '../jobs.options';
import { positiveFinite, positiveInteger } from '../utils/validate';
import type { BoundJobHandler, RegisteredJobHandler } from './job-handler.registry';

/** Validates a decorator's name and options and merges them with the module's. */
export function resolveJobHandler(
  metadata: JobHandlerMetadata,
  handler: BoundJobHandler,
  site: string,
  moduleOptions: ResolvedJobsOptions,
): RegisteredJobHandler {
  const { name, options } = metadata;
  if (typeof name !== 'string' || name.trim() === '' || name.length > MAX_JOB_NAME_LENGTH) {
    throw new InvalidOptionError(
      `@JobHandler name on ${site}`,
      name,
      `must be a non-empty string of at most ${MAX_JOB_NAME_LENGTH} characters`,
    );
  }
  const option = (key: string) => `@JobHandler('${name}').${key} on ${site}`;
  const leaseMs = positiveFinite(option('leaseMs'), options.leaseMs ?? moduleOptions.leaseMs);
  const backoff = {
    baseMs: positiveFinite(option('backoff.baseMs'), options.backoff?.baseMs ?? moduleOptions.backoff.baseMs),
    maxMs: positiveFinite(option('backoff.maxMs'), options.backoff?.maxMs ?? moduleOptions.backoff.maxMs),
  };
  return {
    name,
    handler,
    site,
    concurrency: positiveInteger(option('concurrency'), options.concurrency ?? moduleOptions.concurrency),
    maxAttempts: positiveInteger(option('maxAttempts'), options.maxAttempts ?? moduleOptions.maxAttempts),
    backoff,
    leaseMs,
    // A shorter lease than the module's keeps the module's ratio; the module's interval otherwise.
    heartbeatIntervalMs: options.leaseMs === undefined ? moduleOptions.heartbeatIntervalMs : leaseMs / 3,
    timeoutMs: options.timeoutMs === undefined ? undefined : positiveFinite(option('timeoutMs'), options.timeoutMs),
    declared: options,
  };
}
