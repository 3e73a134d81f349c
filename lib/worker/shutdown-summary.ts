import type { RowFate } from '../execution/row-fate.js';

/** At most this many job ids are listed for the rows left to their leases; the rest are counted. */
const LISTED_IDS = 20;

/** What a worker's shutdown did with the jobs it was running and the claims it took meanwhile. */
export interface ShutdownSummary {
  /** One entry per job: what became of its row. */
  fates: { jobId: string; fate: RowFate }[];
  /** Claims still unanswered at the deadline (a row one of them took is reclaimed once its lease has run out). */
  unansweredClaims: number;
}

/**
 * The one line `close()` ends with, e.g. `3 jobs finished, 1 released, 1 left to its lease (ids 6650…)`: how many of
 * its jobs the shutdown finished (their end is on the row), released (back to `pending`, no attempt counted) and left
 * to their leases (still `running` until the lease runs out; their ids, so they can be looked up).
 */
export function describeShutdown({ fates, unansweredClaims }: ShutdownSummary): string {
  const count = (fate: RowFate) => fates.filter((entry) => entry.fate === fate).length;
  const left = fates.filter((entry) => entry.fate === 'left').map((entry) => entry.jobId);
  if (fates.length === 0 && unansweredClaims === 0) return 'no job was running';
  const finished = count('finished');
  const parts = [
    `${finished} ${finished === 1 ? 'job' : 'jobs'} finished`,
    `${count('released')} released`,
    `${left.length} left to ${left.length === 1 ? 'its lease' : 'their leases'}${idList(left)}`,
  ];
  const notOurs = count('not_ours');
  if (notOurs > 0) parts.push(`${notOurs} no longer this worker's (cancelled or taken over)`);
  if (unansweredClaims > 0) {
    parts.push(
      `${unansweredClaims} ${unansweredClaims === 1 ? 'claim' : 'claims'} unanswered (reclaimed after the lease)`,
    );
  }
  return parts.join(', ');
}

function idList(ids: string[]): string {
  if (ids.length === 0) return '';
  const more = ids.length > LISTED_IDS ? ` and ${ids.length - LISTED_IDS} more` : '';
  return ` (ids ${ids.slice(0, LISTED_IDS).join(', ')}${more})`;
}
