import { WaitTimeoutError } from './wait-timeout.error.js';

/** One name and status a drain was still waiting for when it gave up. */
export interface DrainLeftover {
  name: string;
  status: 'pending' | 'running';
  /** How many jobs of this name are in this status (pending: those due before the drain's deadline). */
  count: number;
  /** One of them (the smallest id), to look up with `findById`. */
  jobId: string;
  /**
   * Of these `running` jobs, how many had their lease run out at the last read: their worker stopped (crashed, or
   * lost the database) and only a process that runs this name reclaims them. Absent when none.
   */
  expiredLeases?: number;
  /** Its name was paused fleet-wide when the drain gave up (`JobsService.pause`): nothing claims it until `resume`. */
  paused?: true;
}

/**
 * `JobsService.drain` gave up: jobs of the names it waited for were still running, or pending and due before its
 * deadline, when `timeoutMs` ran out. A `WaitTimeoutError` (HTTP 504); the jobs are untouched and may still finish.
 */
export class DrainTimeoutError extends WaitTimeoutError {
  constructor(
    /**
     * What the last successful read found left, per name and status; empty when none found anything (a read that
     * failed is the `cause`).
     */
    readonly left: readonly DrainLeftover[],
    timeoutMs: number,
    options?: { cause?: unknown },
  ) {
    // `jobId` (from WaitTimeoutError) is one job still left, so code written for waitUntilFinished still has an id.
    super(left[0]?.jobId ?? '', timeoutMs, options);
    this.message =
      left.length === 0
        ? `Could not confirm within ${timeoutMs} ms that no job was left (drain): the last read failed or was not ` +
          'repeated in time, or an enqueue of this process was still awaiting its acknowledgement'
        : `Jobs still left after ${timeoutMs} ms (drain): ${left.map(describe).join(', ')}; they may still finish later`;
  }
}

function describe({ name, status, count, jobId, expiredLeases, paused }: DrainLeftover): string {
  const orphans = expiredLeases
    ? `, ${expiredLeases} of them with a lease run out, waiting for a worker that runs ${JSON.stringify(name)} to reclaim`
    : '';
  const waiting = paused ? `, paused: nothing claims them until resume(${JSON.stringify(name)})` : '';
  return `${count} ${status} ${JSON.stringify(name)} (e.g. ${jobId}${orphans}${waiting})`;
}
