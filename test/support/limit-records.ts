import type { Collection } from 'mongodb';

/** One execution of a limited test handler, as it recorded itself. Times are epoch ms with sub-ms precision. */
export interface LimitRecord {
  jobId: string;
  name: string;
  group?: string;
  seq?: number;
  /** The workerId of the process that ran it. */
  worker?: string;
  start: number;
  /** Missing while the handler runs, or when its process was killed. */
  end?: number;
}

/** Epoch ms with sub-ms precision (one clock for every app of the test process). */
export function preciseNow(): number {
  return performance.timeOrigin + performance.now();
}

/** Records the start of an execution and returns the function that records its end. */
export async function recordStart(
  records: Collection<LimitRecord>,
  record: Omit<LimitRecord, 'start' | 'end'>,
): Promise<() => Promise<void>> {
  const { insertedId } = await records.insertOne({ ...record, start: preciseNow() });
  return async () => {
    await records.updateOne({ _id: insertedId }, { $set: { end: preciseNow() } });
  };
}

/**
 * The most intervals open at one instant. An interval is [start, end); one with no end is open until `openEnd`
 * (e.g. the instant its process was killed). At equal times an end is counted before a start.
 */
export function maxOverlap(intervals: readonly { start: number; end?: number }[], openEnd = Infinity): number {
  const events: [number, number][] = [];
  for (const { start, end } of intervals) events.push([start, +1], [end ?? openEnd, -1]);
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let most = 0;
  for (const [, delta] of events) {
    open += delta;
    most = Math.max(most, open);
  }
  return most;
}

/** The most `starts` (epoch ms) inside any window [t, t + windowMs). */
export function maxStartsInWindow(starts: readonly number[], windowMs: number): number {
  const sorted = [...starts].sort((a, b) => a - b);
  let most = 0;
  let first = 0;
  for (let last = 0; last < sorted.length; last += 1) {
    while (sorted[last] - sorted[first] >= windowMs) first += 1;
    most = Math.max(most, last - first + 1);
  }
  return most;
}
