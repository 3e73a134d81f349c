import { Inject, Injectable } from '@nestjs/common';
import { PausedNames } from '../claim/paused-names.js';
import { now } from '../model/clock.js';
import { JOBS_RESOLVED_OPTIONS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { raceTimeout } from '../model/race-timeout.js';
import { JobReadStore } from '../persistence/job-read.store.js';
import { type PollState, WORKER_STATE, type WorkerState } from '../worker/worker-state.js';
import type { JobsWorkerStatus } from './jobs-worker-status.js';
import { resolvePingTimeout, type WorkerStatusOptions } from './worker-status-options.js';

/** A worker whose poll loop has not finished an iteration for this many poll intervals is stalled. */
const STALLED_AFTER_POLL_INTERVALS = 3;
/** Claims failing this many times in a row mean the loop polls on schedule but takes nothing: down. */
const DOWN_AFTER_CLAIM_FAILURES = 3;

/** Computes this process's liveness: the database's ping plus, for a worker, the poll loop's schedule. */
@Injectable()
export class JobsWorkerMonitor {
  constructor(
    private readonly reads: JobReadStore,
    @Inject(WORKER_STATE) private readonly worker: WorkerState,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
    private readonly paused: PausedNames,
  ) {}

  /** @throws InvalidOptionError for options that are not an object, an unknown key or a bad `timeoutMs`. */
  async status(options: WorkerStatusOptions = {}): Promise<JobsWorkerStatus> {
    const databaseError = await pingWithin(this.reads.ping(), resolvePingTimeout(options));
    const poll = this.worker.pollState();
    const status: JobsWorkerStatus = {
      status: 'up',
      worker: this.options.worker,
      workerId: this.options.workerId,
      running: poll.running,
      concurrency: this.options.concurrency,
      lastPollAt: poll.lastPollAt,
      lastError: poll.lastError,
      database: databaseError === undefined ? 'up' : 'down',
      paused: this.paused.names(),
    };
    const reason =
      databaseError === undefined ? this.pollProblem(poll) : `Database did not answer a ping: ${databaseError}`;
    if (reason) {
      status.status = 'down';
      status.reason = reason;
    }
    return status;
  }

  private pollProblem(poll: PollState): string | undefined {
    if (!this.options.worker) return undefined; // a producer-only process: the database is all there is
    if (!poll.polling) return 'The poll loop is not running (not started yet, or shut down)';
    const stalledAfter = STALLED_AFTER_POLL_INTERVALS * poll.intervalMs;
    // A loop still in its first poll counts from its start: a worker that just booted is not stalled.
    const sinceProgress = poll.progressAt ? now().getTime() - poll.progressAt.getTime() : Number.POSITIVE_INFINITY;
    if (sinceProgress > stalledAfter) return `The poll loop has not finished a poll within ${stalledAfter} ms`;
    return poll.consecutiveClaimFailures >= DOWN_AFTER_CLAIM_FAILURES
      ? `Claims keep failing (${poll.consecutiveClaimFailures} in a row): ${poll.lastError}`
      : undefined;
  }
}

/** Resolves the error message if the ping failed or took longer than `timeoutMs`, else undefined. */
function pingWithin(ping: Promise<void>, timeoutMs: number): Promise<string | undefined> {
  const answered = ping.then(
    () => undefined,
    (error: unknown) => (error instanceof Error ? error.message : String(error)),
  );
  return raceTimeout(answered, timeoutMs, () => `no answer within ${timeoutMs} ms`);
}
