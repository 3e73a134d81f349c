import { resolveModuleRetention } from './handlers/retention.resolver.js';
import { InvalidOptionError } from './model/errors/invalid-option.error.js';
import {
  DEFAULT_JOBS_OPTIONS,
  MAX_CLAIM_BATCH_SIZE,
  MAX_JOB_NAME_LENGTH,
  MAX_TIMER_MS,
} from './model/jobs.constants.js';
import type { JobsModuleOptions, ResolvedJobsOptions } from './model/jobs.options.js';
import { duration, integerInRange, nonEmptyString, positiveInteger } from './model/validate.js';
import { defaultWorkerId } from './model/worker-id.js';
import { resolveTelemetry } from './telemetry/telemetry.resolver.js';

/** The one place defaults are merged; every rule failure names the option. */
export function resolveJobsOptions(options: JobsModuleOptions = {}): ResolvedJobsOptions {
  const d = DEFAULT_JOBS_OPTIONS;
  const leaseMs = duration('leaseMs', options.leaseMs ?? d.leaseMs);
  const heartbeatIntervalMs = duration('heartbeatIntervalMs', options.heartbeatIntervalMs ?? leaseMs / 3);
  if (heartbeatIntervalMs >= leaseMs) {
    throw new InvalidOptionError('heartbeatIntervalMs', heartbeatIntervalMs, `must be below leaseMs (${leaseMs})`);
  }
  const backoff = {
    baseMs: duration('backoff.baseMs', options.backoff?.baseMs ?? d.backoff.baseMs),
    maxMs: duration('backoff.maxMs', options.backoff?.maxMs ?? d.backoff.maxMs),
  };
  if (backoff.maxMs < backoff.baseMs) {
    throw new InvalidOptionError('backoff.maxMs', backoff.maxMs, `must be at least backoff.baseMs (${backoff.baseMs})`);
  }
  const pollIntervalMs = duration('pollIntervalMs', options.pollIntervalMs ?? d.pollIntervalMs, MAX_TIMER_MS);
  const changeStreamPollIntervalMs = duration(
    'changeStreamPollIntervalMs',
    options.changeStreamPollIntervalMs ?? Math.max(d.changeStreamPollIntervalMs, pollIntervalMs),
    MAX_TIMER_MS,
  );
  if (changeStreamPollIntervalMs < pollIntervalMs) {
    throw new InvalidOptionError(
      'changeStreamPollIntervalMs',
      changeStreamPollIntervalMs,
      `must be at least pollIntervalMs (${pollIntervalMs}): it replaces it while the change stream is live`,
    );
  }
  const worker = options.worker ?? d.worker;
  if (typeof worker !== 'boolean') throw new InvalidOptionError('worker', worker, 'must be true or false');
  const changeStream = options.changeStream ?? d.changeStream;
  if (typeof changeStream !== 'boolean') {
    throw new InvalidOptionError('changeStream', changeStream, 'must be true or false');
  }
  return {
    collectionName: nonEmptyString('collectionName', options.collectionName ?? d.collectionName, 120),
    worker,
    concurrency: positiveInteger('concurrency', options.concurrency ?? d.concurrency),
    pollIntervalMs,
    changeStreamPollIntervalMs,
    changeStream,
    claimBatchSize: integerInRange(
      'claimBatchSize',
      options.claimBatchSize ?? d.claimBatchSize,
      1,
      MAX_CLAIM_BATCH_SIZE,
    ),
    leaseMs,
    heartbeatIntervalMs,
    shutdownGraceMs: duration('shutdownGraceMs', options.shutdownGraceMs ?? d.shutdownGraceMs, MAX_TIMER_MS, true),
    maxAttempts: positiveInteger('maxAttempts', options.maxAttempts ?? d.maxAttempts),
    backoff,
    workerId: nonEmptyString('workerId', options.workerId ?? defaultWorkerId()),
    runOnly: options.runOnly === undefined ? undefined : jobNames('runOnly', options.runOnly),
    indexSetupTimeoutMs: duration(
      'indexSetupTimeoutMs',
      options.indexSetupTimeoutMs ?? d.indexSetupTimeoutMs,
      MAX_TIMER_MS,
    ),
    retention: resolveModuleRetention(options.retention),
    telemetry: resolveTelemetry(options.telemetry),
  };
}

/** What `runOnly` must be, in every message about it: the usual slips are a nested array, an object or a Set. */
const JOB_NAMES_SHAPE = "a flat array of job names, such as ['email.welcome', 'report.build']";

/** A non-empty list of job names, duplicates dropped. Whether each has a handler is checked once they are known. */
function jobNames(option: string, value: unknown): string[] {
  if (!Array.isArray(value)) throw new InvalidOptionError(option, value, `must be ${JOB_NAMES_SHAPE}`);
  if (value.length === 0) {
    throw new InvalidOptionError(
      option,
      value,
      `must be ${JOB_NAMES_SHAPE}, at least one (use worker: false for a process that runs none)`,
    );
  }
  const names = value.map((name, index) => {
    if (typeof name !== 'string') {
      throw new InvalidOptionError(
        `${option}[${index}]`,
        name,
        `must be a job name (${option} must be ${JOB_NAMES_SHAPE})`,
      );
    }
    return nonEmptyString(`${option}[${index}]`, name, MAX_JOB_NAME_LENGTH);
  });
  return [...new Set(names)];
}
