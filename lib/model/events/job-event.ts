import type { JobProgress } from '../job-record.js';

/** What happened to a job in this process. */
export type JobEventType =
  | 'enqueued'
  | 'started'
  | 'renewed'
  | 'completed'
  | 'retrying'
  | 'dead'
  | 'failed'
  | 'stale'
  | 'cancelled'
  /** A `ctx.updateProgress` value was written to the row (one event per write, not per call). */
  | 'progress';

/** One lifecycle event from `JobsService.events$`. Never carries the payload. */
export interface JobEvent {
  type: JobEventType;
  jobId: string;
  name: string;
  /** The attempt the event is about (1-based); 0 before the first attempt (`enqueued`). */
  attempt: number;
  at: Date;
  /** Error message for `retrying`, `dead`, `failed` and `stale`. */
  error?: string;
  /** The value written, for `progress`. */
  progress?: JobProgress;
}
