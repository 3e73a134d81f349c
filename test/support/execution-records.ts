import type { Db } from 'mongodb';

/** What one execution of `chaos.sleep` (test/support/chaos-worker.cjs) recorded. Times are epoch ms. */
export interface ExecutionRecord {
  jobId: string;
  fencingToken: number;
  lockId: string;
  workerId: string;
  pid: number;
  attempt: number;
  /** How long the handler was asked to work. */
  ms: number;
  start: number;
  /** Latest lease deadline this execution saw (a lower bound of its real one if it was killed). */
  deadline: number;
  /** The deadline when the handler started (the claim's `lockedUntil`). */
  initialDeadline: number;
  /** The handler was called with an already-aborted signal. */
  abortedAtStart: boolean;
  /** Missing when the process was killed before the handler returned. */
  end?: number;
  /** Longest time the handler ran past its deadline without its signal aborted (negative: never). */
  maxOverrunMs?: number;
  /**
   * The same, less how late the handler's tick that saw it ran: the part of the overrun during which the worker process
   * was running. A machine too loaded to schedule the process for a while makes `maxOverrunMs` large, not this.
   */
  maxOverrunWhileRunningMs?: number;
  /**
   * How late the latest-running handler tick at or after `deadlineAtAbort` fired: the time the process was not running
   * while its watchdog was due. A watchdog cannot fire while its process is not scheduled.
   */
  notRunningAtAbortMs?: number;
  stale?: boolean;
  abortedAt?: number;
  deadlineAtAbort?: number;
  abortReason?: string;
  leaseLostReason?: 'expired' | 'taken-over';
}

export async function readExecutions(db: Db): Promise<ExecutionRecord[]> {
  return db
    .collection<ExecutionRecord>('executions')
    .find({}, { projection: { _id: 0 } })
    .toArray();
}

export function groupByJob(records: ExecutionRecord[]): Map<string, ExecutionRecord[]> {
  const byJob = new Map<string, ExecutionRecord[]>();
  for (const record of records) {
    const list = byJob.get(record.jobId) ?? [];
    list.push(record);
    byJob.set(record.jobId, list);
  }
  for (const list of byJob.values()) list.sort((a, b) => a.fencingToken - b.fencingToken);
  return byJob;
}

/**
 * Pairs of executions of one job that held its lease at the same time, as human-readable lines
 * (empty when there are none), plus executions that share a fencing token.
 *
 * A later owner (higher fencing token) may only start once the earlier one's lease deadline has
 * passed: it claims the row when `lockedUntil <= now`, and every deadline the earlier owner saw was
 * in the row before that. So `later.start >= earlier.deadline` for every pair, whether the earlier
 * owner was killed (no `end`), went stale, or finished but could not write its result. The handlers
 * never fail on purpose, so no job is retried through the failure path, where a retry may start as
 * soon as the failed attempt's result is written.
 */
export function leaseOverlaps(records: ExecutionRecord[]): string[] {
  const problems: string[] = [];
  for (const [jobId, list] of groupByJob(records)) {
    for (let i = 0; i < list.length; i += 1) {
      for (let j = i + 1; j < list.length; j += 1) {
        const [earlier, later] = [list[i], list[j]];
        if (earlier.fencingToken === later.fencingToken) {
          problems.push(`job ${jobId}: two executions with fencing token ${earlier.fencingToken}`);
        } else if (later.start < earlier.deadline) {
          problems.push(
            `job ${jobId}: token ${later.fencingToken} (${later.workerId}) started ${earlier.deadline - later.start} ms ` +
              `before the lease of token ${earlier.fencingToken} (${earlier.workerId}) ran out`,
          );
        }
      }
    }
  }
  return problems;
}

/**
 * Executions whose handler was called although their lease had already run out (the claim's answer
 * came back after its `lockedUntil`): another worker may already own the job when such a handler starts.
 */
export function startedWithoutLease(records: ExecutionRecord[]): string[] {
  return records
    .filter((r) => r.abortedAtStart || r.start > r.deadline)
    .map(
      (r) =>
        `job ${r.jobId} token ${r.fencingToken} (${r.workerId}) was started ${r.start - r.deadline} ms after its lease ` +
        `deadline${r.abortedAtStart ? ', with its signal already aborted' : ''}`,
    );
}

/**
 * Executions whose watchdog fired late: aborted more than `marginMs` after their deadline, or seen
 * running (signal not aborted) more than `marginMs` past it. An execution that started after its
 * deadline (claim answered too late) is judged by its first look at the signal, not by its deadline.
 * Time the worker process was not running (a loaded machine did not schedule it) is not counted against the
 * watchdog: it is taken out of the overrun, and added to the margin of the abort.
 */
export function lateWatchdogs(records: ExecutionRecord[], marginMs: number): string[] {
  const problems: string[] = [];
  for (const r of records) {
    const about = `job ${r.jobId} token ${r.fencingToken} (${r.workerId})`;
    const overrun = r.maxOverrunWhileRunningMs ?? r.maxOverrunMs;
    if (overrun !== undefined && overrun > marginMs) {
      problems.push(`${about} ran ${overrun} ms past its lease deadline with its signal not aborted, while running`);
    }
    if (r.abortedAt !== undefined && r.deadlineAtAbort !== undefined && !r.abortedAtStart) {
      const late = r.abortedAt - r.deadlineAtAbort;
      const notRunning = r.notRunningAtAbortMs ?? 0;
      if (late > marginMs + notRunning) {
        problems.push(
          `${about} aborted ${late} ms after its deadline (${r.abortReason}), ${notRunning} ms of it not running`,
        );
      }
    }
  }
  return problems;
}
