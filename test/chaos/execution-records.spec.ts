import { describe, expect, it } from '@jest/globals';
import { type ExecutionRecord, lateWatchdogs, leaseOverlaps, startedWithoutLease } from '../support/execution-records';

/** The chaos tests pass when these checks find nothing: make sure they do find what they look for. */
describe('execution record checks (chaos test tooling)', () => {
  const execution = (fields: Partial<ExecutionRecord>): ExecutionRecord => ({
    jobId: 'job1',
    fencingToken: 1,
    lockId: 'w#1',
    workerId: 'w',
    pid: 1,
    attempt: 1,
    ms: 100,
    start: 1_000,
    deadline: 2_000,
    initialDeadline: 2_000,
    abortedAtStart: false,
    ...fields,
  });

  it('accepts a takeover after the deadline, and reports one before it or a reused token', () => {
    const killed = execution({ fencingToken: 1, start: 1_000, deadline: 2_500 });
    expect(leaseOverlaps([killed, execution({ fencingToken: 2, start: 2_500, deadline: 3_500 })])).toEqual([]);
    expect(leaseOverlaps([killed, execution({ fencingToken: 2, start: 2_499, deadline: 3_500 })])).toEqual([
      'job job1: token 2 (w) started 1 ms before the lease of token 1 (w) ran out',
    ]);
    // Not only neighbours: token 3 must also respect token 1's deadline.
    const second = execution({ fencingToken: 2, start: 2_000, deadline: 1_900, abortedAtStart: true });
    expect(leaseOverlaps([second, killed, execution({ fencingToken: 3, start: 2_400 })])).toHaveLength(2);
    expect(leaseOverlaps([killed, execution({ fencingToken: 1, start: 3_000 })])).toEqual([
      'job job1: two executions with fencing token 1',
    ]);
    // Different jobs never conflict.
    expect(leaseOverlaps([killed, execution({ jobId: 'job2', start: 1_000 })])).toEqual([]);
  });

  it('reports watchdogs that fired late, and handlers run past their deadline', () => {
    const onTime = execution({ abortedAt: 2_040, deadlineAtAbort: 2_000, maxOverrunMs: 30, end: 2_045 });
    expect(lateWatchdogs([onTime], 50)).toEqual([]);
    expect(lateWatchdogs([execution({ abortedAt: 2_060, deadlineAtAbort: 2_000, end: 2_061 })], 50)).toHaveLength(1);
    expect(lateWatchdogs([execution({ maxOverrunMs: 51, end: 2_100 })], 50)).toHaveLength(1);
    // Time the process was not scheduled does not count against the watchdog, and only that time.
    const starved = execution({
      abortedAt: 2_348,
      deadlineAtAbort: 2_000,
      notRunningAtAbortMs: 340,
      maxOverrunMs: 333,
      maxOverrunWhileRunningMs: 8,
      end: 2_350,
    });
    expect(lateWatchdogs([starved], 50)).toEqual([]);
    expect(lateWatchdogs([{ ...starved, notRunningAtAbortMs: 200 }], 50)).toEqual([
      'job job1 token 1 (w) aborted 348 ms after its deadline (undefined), 200 ms of it not running',
    ]);
    expect(lateWatchdogs([{ ...starved, maxOverrunWhileRunningMs: 60 }], 50)).toEqual([
      'job job1 token 1 (w) ran 60 ms past its lease deadline with its signal not aborted, while running',
    ]);
    // A handler started with an already aborted signal is reported by startedWithoutLease instead.
    const lateStart = execution({ start: 2_600, abortedAtStart: true, abortedAt: 2_600, deadlineAtAbort: 2_000 });
    expect(lateWatchdogs([lateStart], 50)).toEqual([]);
    expect(startedWithoutLease([lateStart, onTime])).toEqual([
      'job job1 token 1 (w) was started 600 ms after its lease deadline, with its signal already aborted',
    ]);
  });
});
