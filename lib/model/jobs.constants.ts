/**
 * Metadata key under which `@JobHandler` stores its name and options. A string, so that either build of the package
 * (CommonJS, ES module) finds the handlers the other's decorator marked.
 */
export const JOB_HANDLER_METADATA = 'jobs:handler';

// The injection tokens are `Symbol()`, not `Symbol.for()`: each build's JobsModule resolves its own providers.

/** Injection token of the resolved (defaults merged, validated) module options. */
export const JOBS_RESOLVED_OPTIONS = Symbol('JOBS_RESOLVED_OPTIONS');

/** Injection token of the mongoose model backing the jobs collection. */
export const JOBS_MODEL = Symbol('JOBS_MODEL');

/** Context of every log line this library writes. */
export const JOBS_LOGGER_CONTEXT = 'Jobs';

/** History entries kept per job; older attempts are dropped so a document never grows without bound. */
export const MAX_ATTEMPT_HISTORY = 50;

/**
 * MongoDB's document size limit minus room for the job's own fields, above all a full attempt history
 * (MAX_ATTEMPT_HISTORY × bounded message, class and stack, about 330 KB at worst): a job with the largest
 * payload must still be able to record its failures.
 */
export const MAX_PAYLOAD_BYTES = 16 * 1024 * 1024 - 512 * 1024;

/** MongoDB's limit on one document's BSON size. */
export const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;

/**
 * Largest progress object (BSON bytes). Progress is a status line, not data: kept small so the frequent progress
 * writes stay cheap, and so the completion write's room for the result is known.
 */
export const MAX_PROGRESS_BYTES = 4 * 1024;

/** Longest accepted duration (~31 years): longer is a unit mistake, and ~2^52 ms past now is no valid Date. */
export const MAX_DURATION_MS = 1e12;

/**
 * Longest delay setTimeout honours (~24.8 days); Node fires a longer one after 1 ms (TimeoutOverflowWarning), which
 * would, say, mark a long lease stale at once. Every timer the library sets is capped or validated against it.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** Writes racing on a dedupe scope that changes hands (enqueue, retry) are repeated this many times at most. */
export const DEDUPE_WRITE_TRIES = 5;

/**
 * Highest `maxAttempts` an enqueue may ask for: more is a mistake (1e300 would retry for ever, one backoff at a
 * time), and a job's attempt history keeps only the last MAX_ATTEMPT_HISTORY anyway.
 */
export const MAX_ENQUEUE_ATTEMPTS = 1_000;

/** Largest `claimBatchSize`: a batch of that many is a bulk of that many updates and a read-back of that many rows. */
export const MAX_CLAIM_BATCH_SIZE = 1_000;

/** Longest accepted job name. */
export const MAX_JOB_NAME_LENGTH = 200;

export const DEFAULT_JOBS_OPTIONS = {
  collectionName: 'jobs',
  worker: true,
  concurrency: 4,
  pollIntervalMs: 1000,
  claimBatchSize: 32,
  changeStreamPollIntervalMs: 30_000,
  changeStream: true,
  leaseMs: 30_000,
  shutdownGraceMs: 10_000,
  maxAttempts: 5,
  backoff: { baseMs: 1000, maxMs: 900_000 },
  indexSetupTimeoutMs: 60_000,
  telemetry: { metricsIntervalMs: 15_000, extraJobNames: [] },
  retention: {
    completed: 7 * 86_400_000,
    dead: 30 * 86_400_000,
    failed: 30 * 86_400_000,
    cancelled: 30 * 86_400_000,
    sweepIntervalMs: 60_000,
  },
} as const;

/** After shutdown aborts the handlers still running, how long it waits for them to settle. */
export const SHUTDOWN_SETTLE_MS = 1_000;

/** After that, how long shutdown waits for the outcome writes of the handlers that settled. */
export const SHUTDOWN_WRITE_MS = 2_000;

/**
 * Most names paused at once: every worker reads them all every poll interval, so the set stays small. `pause` of one
 * more is refused (`InvalidOptionError`).
 */
export const MAX_PAUSED_NAMES = 1_000;
