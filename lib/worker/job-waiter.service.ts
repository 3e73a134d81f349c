import { Inject, Injectable } from '@nestjs/common';
import type { Types } from 'mongoose';
import { filter } from 'rxjs';
import { JobNotFoundError } from '../model/errors/job-not-found.error.js';
import { WaitTimeoutError } from '../model/errors/wait-timeout.error.js';
import type { JobEventType } from '../model/events/job-event.js';
import { JobEvents } from '../model/events/job-events.js';
import type { JobDocument } from '../model/job-document.js';
import type { JobStatus } from '../model/job-record.js';
import { JOBS_RESOLVED_OPTIONS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { raceTimeout } from '../model/race-timeout.js';
import { JobReadStore } from '../persistence/job-read.store.js';
import { Wakeup } from './wakeup.js';

/** The statuses a job never leaves by itself: a wait ends on them. */
const FINAL_STATUSES: ReadonlySet<JobStatus> = new Set(['completed', 'dead', 'failed', 'cancelled']);
/** Local events after which the row may be final: each wakes the wait for one read. */
const FINAL_EVENTS: ReadonlySet<JobEventType> = new Set(['completed', 'dead', 'failed', 'cancelled']);
/** Longest pause between two reads of a job run elsewhere. */
const MAX_WAIT_POLL_MS = 1_000;

const TIMED_OUT: unique symbol = Symbol('timed out');

/**
 * Waits for a job to reach a final status. The row is the truth, whoever runs the job: it is read at once, after
 * every local event that may have finished it (so a job run, finished or cancelled in this process is seen without
 * delay), and otherwise every `min(pollIntervalMs, 1 s)`: the module's poll interval is the latency its users
 * already accept for a job to be picked up, and the 1 s cap keeps a wait on a slow-polling producer (often configured
 * with `worker: false` and a long interval) responsive. One indexed read by `_id` per waiter per interval.
 */
@Injectable()
export class JobWaiter {
  constructor(
    private readonly reads: JobReadStore,
    private readonly events: JobEvents,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
  ) {}

  /**
   * The job's row once it is final. Rejects with JobNotFoundError when there is no such row (at the first read, or
   * later if it was deleted), with WaitTimeoutError once `timeoutMs` passed (a read error meanwhile is its `cause`).
   */
  async waitUntilFinal(id: Types.ObjectId, timeoutMs: number): Promise<JobDocument> {
    const jobId = id.toHexString();
    const deadline = Date.now() + timeoutMs;
    const wakeup = new Wakeup();
    // Subscribed before the first read: an event between that read and the subscription is not missed.
    const subscription = this.events.events$
      .pipe(filter((event) => event.jobId === jobId && FINAL_EVENTS.has(event.type)))
      .subscribe(() => wakeup.wake());
    const pollMs = Math.min(this.options.pollIntervalMs, MAX_WAIT_POLL_MS);
    let readError: unknown;
    try {
      for (;;) {
        const row = await raceTimeout(
          this.reads.findById(id).then(
            (doc) => {
              readError = undefined;
              return doc;
            },
            (error: unknown) => {
              // A failed read is tried again at the next interval: an outage shorter than the wait is not an answer.
              readError = error;
              return undefined;
            },
          ),
          deadline - Date.now(),
          (): typeof TIMED_OUT => TIMED_OUT,
        );
        if (row === null) throw new JobNotFoundError(jobId);
        if (row !== undefined && row !== TIMED_OUT && FINAL_STATUSES.has(row.status)) return row;
        const remaining = deadline - Date.now();
        if (row === TIMED_OUT || remaining <= 0) {
          throw new WaitTimeoutError(jobId, timeoutMs, readError === undefined ? undefined : { cause: readError });
        }
        await wakeup.sleep(Math.min(pollMs, remaining));
      }
    } finally {
      subscription.unsubscribe();
    }
  }
}
