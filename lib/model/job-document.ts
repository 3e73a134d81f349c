import type { Types } from 'mongoose';
import type { JobLogLine } from './job-log.js';
import type { JobAttempt, JobProgress, JobStatus } from './job-record.js';

/** The document in MongoDB. Optional fields are absent (unset) rather than null. */
export interface JobDocument {
  _id: Types.ObjectId;
  name: string;
  payload: unknown;
  status: JobStatus;
  runAt: Date;
  priority: number;
  attemptCount: number;
  maxAttempts: number;
  attempts: JobAttempt[];
  lastError?: string;
  lockedBy?: string;
  lockedUntil?: Date;
  /**
   * The lease its owner runs under, in ms: written by the claim (the module's `leaseMs`) and by every renewal (the
   * handler's). A cancel raises `lockedUntil` by it: the cancelled handler's settle window.
   */
  leaseMs?: number;
  /**
   * The lock id of the run whose owner-fenced write last ended a run of this row (completed, retrying, dead, failed,
   * released). That write unsets `lockedBy`, so this is how its writer knows its own write landed when the answer was
   * lost or came late. Left in place by later claims (lock ids are never reused).
   */
  finishedBy?: string;
  fencingToken: number;
  /** The user's key, kept for display and for `retry` after the job leaves pending/running. */
  dedupeKey?: string;
  /** `dedupeScope(name, dedupeKey)` while the job is pending or running; what the unique index enforces. */
  dedupeScope?: string;
  /** `throttleScope(name, key, windowMs, runAt)`: never unset, so one job holds its window for as long as it exists. */
  throttleScope?: string;
  /** `debounceScope(name, key)` while the job is pending; unset by its claim (and cancel), freeing the key. */
  debounceScope?: string;
  /** A debounced job's latest `runAt`, from its `maxWaitMs`: a replacement never moves `runAt` past it. */
  debounceUntil?: Date;
  /** `cron:<name>:<tick ISO>` of a scheduled job; unlike dedupeScope never unset, so a tick runs once. */
  scheduleKey?: string;
  /** Set by the write that finishes the job, from its retention; the sweeper deletes the row after it. */
  expiresAt?: Date;
  /** The `group` enqueue option (e.g. a tenant id): what a handler's `groupConcurrency` counts by. */
  group?: string;
  /**
   * The `globalConcurrency` slot this row holds (`concurrencySlotKey`), set by the claim of a limited name and unset
   * by every write that ends the run, except cancel: a cancelled run's owner may run until its `lockedUntil`.
   */
  concurrencySlot?: string;
  /** The `groupConcurrency` slot this row holds (`groupSlotKey`), with the same lifetime as `concurrencySlot`. */
  groupSlot?: string;
  createdAt: Date;
  updatedAt: Date;
  startedAt?: Date;
  finishedAt?: Date;
  /** The handler's resolved value, set by the completion write (absent when it resolved `undefined`). */
  result?: unknown;
  /** Set by progress writes (owner-fenced, with a lease renewal) and by the completion write. */
  progress?: JobProgress;
  /** The last MAX_LOG_LINES lines handlers logged (`ctx.log`), across attempts, oldest first. */
  logs?: JobLogLine[];
  /** Every line ever logged (more than `logs` holds when the oldest were dropped). */
  logCount?: number;
  /** The enqueuing span's propagated context (W3C `traceparent`/`tracestate`), when telemetry is on. */
  traceContext?: Record<string, string>;
}
