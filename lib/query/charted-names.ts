import type { JobStatus } from '../model/job-record.js';

/**
 * The names `metrics` returns buckets for when the caller names none: the `limit` names with the most failed + dead
 * rows (what an operator looks at first), then the busiest (most rows), then by name so the choice is stable.
 */
export function chartedNames(
  entries: Iterable<{ name: string; counts: Record<JobStatus, number> }>,
  limit: number,
): string[] {
  const ranked = [...entries].map(({ name, counts }) => ({
    name,
    failures: counts.failed + counts.dead,
    rows: Object.values(counts).reduce((sum, count) => sum + count, 0),
  }));
  ranked.sort((a, b) => b.failures - a.failures || b.rows - a.rows || (a.name < b.name ? -1 : 1));
  return ranked.slice(0, limit).map((entry) => entry.name);
}
