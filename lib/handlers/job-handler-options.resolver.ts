import type { CronTime } from 'cron';
import { IANAZone } from 'luxon';
import { errorInfo } from '../model/error-info.js';
import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { MAX_JOB_NAME_LENGTH, MAX_TIMER_MS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { duration, positiveInteger } from '../model/validate.js';
import { parseCron } from './cron-fields.js';
import { CronSchedule } from './cron-schedule.js';
import { resolveFleetLimits } from './fleet-limits.resolver.js';
import type { JobHandlerMetadata, JobHandlerOptions } from './job-handler.options.js';
import type { BoundJobHandler, RegisteredJobHandler } from './registered-job-handler.js';
import { resolveHandlerRetention } from './retention.resolver.js';

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
  const leaseMs = duration(option('leaseMs'), options.leaseMs ?? moduleOptions.leaseMs);
  if (leaseMs < moduleOptions.leaseMs) {
    // Every claim locks its row for the module's lease before it knows the row's handler: a shorter one would be
    // ignored, and a crashed worker's job would wait the module's lease anyway.
    throw new InvalidOptionError(
      option('leaseMs'),
      leaseMs,
      `must be at least the module's leaseMs (${moduleOptions.leaseMs}); for a shorter lease on this handler, ` +
        "lower the module's leaseMs and raise it per handler on the others",
    );
  }
  const backoff = {
    baseMs: duration(option('backoff.baseMs'), options.backoff?.baseMs ?? moduleOptions.backoff.baseMs),
    maxMs: duration(option('backoff.maxMs'), options.backoff?.maxMs ?? moduleOptions.backoff.maxMs),
  };
  return {
    name,
    handler,
    site,
    concurrency: positiveInteger(option('concurrency'), options.concurrency ?? moduleOptions.concurrency),
    maxAttempts: positiveInteger(option('maxAttempts'), options.maxAttempts ?? moduleOptions.maxAttempts),
    backoff,
    leaseMs,
    timeoutMs:
      options.timeoutMs === undefined ? undefined : duration(option('timeoutMs'), options.timeoutMs, MAX_TIMER_MS),
    schedule: resolveSchedule(options, option),
    retention: resolveHandlerRetention(option('retention'), options.retention, moduleOptions.retention.periods),
    limits: resolveFleetLimits(options, option),
  };
}

function resolveSchedule(
  options: JobHandlerOptions,
  option: (key: string) => string,
): RegisteredJobHandler['schedule'] {
  if (options.cron === undefined) {
    if (options.timeZone !== undefined)
      throw new InvalidOptionError(option('timeZone'), options.timeZone, 'needs a cron');
    return undefined;
  }
  const timeZone = options.timeZone ?? 'UTC';
  if (typeof timeZone !== 'string' || !IANAZone.isValidZone(timeZone)) {
    throw new InvalidOptionError(option('timeZone'), timeZone, 'must be an IANA time zone such as "Europe/Berlin"');
  }
  const cron = options.cron;
  let parsed: CronTime;
  try {
    if (typeof cron !== 'string') throw new Error('not a string');
    parsed = parseCron(cron);
  } catch (error) {
    throw new InvalidOptionError(option('cron'), cron, `must be a valid cron expression (${errorInfo(error).message})`);
  }
  // Outside the try: any other error (an unreadable parse after a cron upgrade) keeps its own message.
  const schedule = new CronSchedule(cron, timeZone, parsed);
  if (schedule.neverMatches) throw new InvalidOptionError(option('cron'), cron, 'never matches a date');
  return schedule;
}
