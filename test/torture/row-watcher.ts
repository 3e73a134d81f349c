import type { Collection, Document } from 'mongodb';
import type { HistoryWriter } from './history';

/** The fields of a job row the checker reads (snapshots and final rows). */
export interface RowSnapshot {
  _id: { toHexString(): string } | string;
  name: string;
  status: string;
  lockedBy?: string;
  lockedUntil?: Date;
  attemptCount?: number;
  maxAttempts?: number;
  attempts?: { at: Date; error: string; errorClass: string }[];
  concurrencySlot?: string;
  groupSlot?: string;
  /** A debounced job's key: held only while it is pending (its claim unsets it). */
  debounceScope?: string;
  group?: string;
  runAt?: Date;
  finishedAt?: Date;
}

const POLL_MS = 150;
const FIELDS = { name: 1, status: 1, lockedBy: 1, lockedUntil: 1, attemptCount: 1 } as const;

/**
 * Reads every row of the collection every 150 ms (straight from the server, never through a proxy) and records in
 * the history when a row's status or owner changed (`row`), or when it vanished (`row-gone`, with when it was last
 * seen and in which status): the evidence of what a purge or a sweep deleted, and of which lock held a row.
 */
export class RowWatcher {
  private readonly seen = new Map<string, { status: string; lock?: string; t: number }>();
  private loop: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly jobs: Collection<Document>,
    private readonly history: HistoryWriter,
  ) {}

  start(): void {
    this.loop = (async () => {
      while (!this.stopped) {
        await this.poll().catch(() => undefined);
        await new Promise((done) => setTimeout(done, POLL_MS));
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }

  private async poll(): Promise<void> {
    const t = Date.now();
    const rows = await this.jobs.find({}, { projection: FIELDS }).toArray();
    const present = new Set<string>();
    for (const row of rows) {
      const job = String(row._id);
      present.add(job);
      const before = this.seen.get(job);
      const lock = row.lockedBy as string | undefined;
      if (before && before.status === row.status && before.lock === lock) {
        before.t = t;
        continue;
      }
      this.seen.set(job, { status: row.status as string, lock, t });
      this.history.record({
        type: 'row',
        job,
        name: row.name,
        status: row.status,
        lock,
        lockedUntil: (row.lockedUntil as Date | undefined)?.getTime(),
        attemptCount: row.attemptCount,
        t,
      });
    }
    for (const [job, before] of this.seen) {
      if (present.has(job)) continue;
      this.seen.delete(job);
      this.history.record({ type: 'row-gone', job, lastStatus: before.status, lastSeen: before.t, t });
    }
  }
}
