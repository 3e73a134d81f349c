import type { JobStatus } from '../model/job-record.js';

/** Field sets and write options the stores share. */

/** A debounced job's key and deadline, unset when it leaves `pending`: a later enqueue of the key stores a new job. */
export const DEBOUNCE_FIELDS = { debounceScope: '', debounceUntil: '' } as const;

/** Fields that only mean something while a job is `running`: its lock and lease, and the fleet-limit slots it holds. */
export const LOCK_FIELDS = { lockedBy: '', lockedUntil: '', leaseMs: '', concurrencySlot: '', groupSlot: '' } as const;

/**
 * Unset when a job finishes (completed, dead, failed): the lock, and the dedupe scope, so the same key can be enqueued
 * again. The user's `dedupeKey` stays on the row (display, and `retry` takes the scope back). The debounce fields are
 * unset by the claim already (`DEBOUNCE_FIELDS`); a row set aside unclaimed gives them up here.
 */
export const RELEASED_FIELDS = { ...LOCK_FIELDS, dedupeScope: '', ...DEBOUNCE_FIELDS } as const;

/** The statuses a dedupe scope is held in (the unique index allows one live row per scope). */
export const LIVE: JobStatus[] = ['pending', 'running'];

/** User values a write carries (result, progress): keys whose value is `undefined` are left out, not stored as null. */
export const USER_VALUE_OPTIONS = { ignoreUndefined: true } as const;
