import type { mongo, Types } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';
import type { JobAttempt } from '../model/job-record.js';
import { MAX_ATTEMPT_HISTORY } from '../model/jobs.constants.js';
import { DEBOUNCE_FIELDS } from './row-fields.js';

/**
 * How a claim finds and takes a row: the filters, sorts and updates of a claim (`pending`) and a reclaim (`running`),
 * the scope of names and set-aside ids, and the fleet-limit slots a claim takes in the same write. Only
 * `JobClaimStore` runs these queries; the types are shared with the claim services.
 */

const CLAIM_SORT = { priority: -1, runAt: 1, _id: 1 } as const;
const RECLAIM_SORT = { lockedUntil: 1, _id: 1 } as const;

/** What a claim may take: rows with one of `names`, except the ids set aside in memory. */
export interface ClaimScope {
  names: string[];
  skipIds: readonly Types.ObjectId[];
  /** Only rows of this group (null: rows without one, or with `group: null`); absent: any group. */
  group?: string | null;
  /** Not rows under these lock ids: a reclaim skips the rows of its own process's claims still unanswered. */
  skipLocks?: readonly string[];
}

/** What a take of exactly one row checks besides its id: its name, and (a reclaim) locks it must not take over. */
export type ByIdScope = Pick<ClaimScope, 'names' | 'skipLocks'>;

/** Where a claim step takes rows from: due `pending` rows, or `running` rows whose lease ran out. */
export type ClaimSource = 'pending' | 'running';

/** What differs between a claim and a reclaim: which rows, in which order, and the write that takes one. */
export const CLAIM_SOURCES: Record<
  ClaimSource,
  {
    filter: (now: Date) => mongo.Filter<JobDocument>;
    /** Field by field (an object, not the driver's other `Sort` shapes): plain `find` commands send it as it is. */
    sort: Readonly<Record<string, 1 | -1>>;
    update: (now: Date, lockId: string, lockedUntil: Date) => mongo.UpdateFilter<JobDocument>;
  }
> = {
  pending: { filter: dueFilter, sort: CLAIM_SORT, update: claimUpdate },
  running: { filter: expiredFilter, sort: RECLAIM_SORT, update: reclaimUpdate },
};

export function dueFilter(now: Date): mongo.Filter<JobDocument> {
  return { status: 'pending', runAt: { $lte: now } };
}

function expiredFilter(now: Date): mongo.Filter<JobDocument> {
  return { status: 'running', lockedUntil: { $lte: now } };
}

/**
 * Whether a row read by id is where a claim from `source` would take it (`dueFilter`/`expiredFilter`, in memory):
 * `runNow` asks this before a limited name's limits, so that a finished, not-yet-due or locked row gets its own
 * answer instead of one about the limits.
 */
export function isInSource(row: Pick<JobDocument, 'status' | 'runAt' | 'lockedUntil'>, source: ClaimSource, now: Date) {
  if (source === 'pending') return row.status === 'pending' && row.runAt <= now;
  return row.status === 'running' && row.lockedUntil !== undefined && row.lockedUntil <= now;
}

export function namesFilter(names: string[]): mongo.Filter<JobDocument> {
  return { name: { $in: names } };
}

/** The names, and the locks a take must not take over (a residual filter: the claim indexes stay the same). */
export function byIdScopeFilter(scope: ByIdScope): mongo.Filter<JobDocument> {
  const filter = namesFilter(scope.names);
  if (scope.skipLocks && scope.skipLocks.length > 0) filter.lockedBy = { $nin: [...scope.skipLocks] };
  return filter;
}

export function scopeFilter(scope: ClaimScope): mongo.Filter<JobDocument> {
  const filter = byIdScopeFilter(scope);
  if (scope.skipIds.length > 0) filter._id = { $nin: [...scope.skipIds] };
  // `group: null` matches rows without the field and rows where another tool stored null: both are ungrouped.
  // (Object.assign: the typed filter of a `group?: string` field has no null.)
  if (scope.group !== undefined) Object.assign(filter, { group: scope.group });
  return filter;
}

function reclaimUpdate(now: Date, lockId: string, lockedUntil: Date): mongo.UpdateFilter<JobDocument> {
  const attempt: JobAttempt = {
    at: now,
    error: 'Lease expired before the previous attempt finished',
    errorClass: 'LeaseExpired',
  };
  return {
    $set: { ...lockOf(now, lockId, lockedUntil), lastError: attempt.error },
    $inc: { attemptCount: 1, fencingToken: 1 },
    $push: { attempts: { $each: [attempt], $slice: -MAX_ATTEMPT_HISTORY } },
  };
}

/** Takes a pending row; a debounced job gives its key up as it starts, so the next enqueue of it stores a new job. */
function claimUpdate(now: Date, lockId: string, lockedUntil: Date): mongo.UpdateFilter<JobDocument> {
  return {
    $set: { status: 'running', ...lockOf(now, lockId, lockedUntil) },
    $inc: { fencingToken: 1 },
    $unset: DEBOUNCE_FIELDS,
  };
}

/** The lock a claim writes, with the lease it is for (`leaseMs`: what a cancel raises `lockedUntil` by). */
function lockOf(now: Date, lockId: string, lockedUntil: Date) {
  const leaseMs = lockedUntil.getTime() - now.getTime();
  return { lockedBy: lockId, lockedUntil, leaseMs, startedAt: now, updatedAt: now };
}

/** The fields holding a row's fleet-limit slots. */
export type SlotField = 'concurrencySlot' | 'groupSlot';

/** The slots a limited name's claim takes with the row, in the same write (the unique indexes arbitrate). */
export interface SlotClaim {
  concurrencySlot?: string;
  groupSlot?: string;
}

/** A row holding a slot, as `findSlotHolders` reads it. */
export type SlotHolder = Pick<
  JobDocument,
  | '_id'
  | 'status'
  | 'lockedBy'
  | 'lockedUntil'
  | 'concurrencySlot'
  | 'groupSlot'
  | 'group'
  | 'attemptCount'
  | 'maxAttempts'
>;

export const SLOT_HOLDER_FIELDS = {
  status: 1,
  lockedBy: 1,
  lockedUntil: 1,
  concurrencySlot: 1,
  groupSlot: 1,
  group: 1,
  attemptCount: 1,
  maxAttempts: 1,
} as const;

export function withSlots(update: mongo.UpdateFilter<JobDocument>, slots?: SlotClaim): mongo.UpdateFilter<JobDocument> {
  if (slots === undefined) return update;
  return { ...update, $set: { ...update.$set, ...slots } };
}

export function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
