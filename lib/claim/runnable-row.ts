import type { ClaimedRow } from '../model/claimed-job.js';
import { describeValue } from '../model/errors/describe-value.js';
import { describeJobId, isObjectId } from '../model/job-id.js';

/**
 * Why a claimed row cannot run as stored, or undefined when it can. Rows written by hand, by another tool or by a
 * buggy version must be set aside with a reason, not crash the worker that claimed them.
 */
export function whyNotRunnable(doc: ClaimedRow): string | undefined {
  const row = doc as unknown as Record<string, unknown>;
  if (!isObjectId(row._id)) return `its _id ${describeJobId(row._id)} is not an ObjectId`;
  if (typeof row.name !== 'string') return 'its name is not a string';
  if (!isCount(row.attemptCount)) return `its attemptCount (${describeJobId(row.attemptCount)}) is malformed`;
  if (!isCount(row.maxAttempts) || row.maxAttempts === 0) {
    return `its maxAttempts (${describeJobId(row.maxAttempts)}) is malformed`;
  }
  if (typeof row.fencingToken !== 'number') return 'its fencingToken is malformed';
  if (!(row.lockedUntil instanceof Date)) return 'its lockedUntil is malformed';
  if (isMalformedGroup(row.group)) return `its group (${describeValue(row.group)}) is not a non-empty string`;
  // Every renewal and outcome that carries ctx.log lines pushes to `logs` and raises `logCount`: the server would
  // refuse each of them on such a row, and the lease would run out.
  if (row.logs !== undefined && !Array.isArray(row.logs))
    return `its logs (${describeValue(row.logs)}) are not an array`;
  if (row.logCount !== undefined && typeof row.logCount !== 'number') return 'its logCount is not a number';
  return undefined;
}

/**
 * Whether a row's `group` is neither a group (a non-empty string, as enqueue accepts) nor none (absent, or null as
 * another tool may write it): a number, an empty string, an object, an array. Such a row cannot run as stored.
 */
export function isMalformedGroup(group: unknown): boolean {
  return group !== undefined && group !== null && (typeof group !== 'string' || group === '');
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0;
}
