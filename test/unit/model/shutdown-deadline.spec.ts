import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { SHUTDOWN_SETTLE_MS, SHUTDOWN_WRITE_MS } from '../../../lib/model/jobs.constants';
import { ShutdownDeadline } from '../../../lib/model/shutdown-deadline';

const GRACE_MS = 1_000;
const BOUND_MS = GRACE_MS + SHUTDOWN_SETTLE_MS + SHUTDOWN_WRITE_MS;

describe('ShutdownDeadline', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: 1_000_000 });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  /** Whether `work` has settled, read after each advance. */
  function track(work: Promise<unknown>): { settled: boolean } {
    const state = { settled: false };
    void work.then(() => {
      state.settled = true;
    });
    return state;
  }

  it('has no deadline before shutdown, then one measured from the first start only', async () => {
    const deadline = new ShutdownDeadline({ shutdownGraceMs: GRACE_MS });
    expect(deadline.started).toBe(false);
    expect(deadline.graceEndsAt).toBeUndefined();
    expect(deadline.endsAt).toBeUndefined();
    deadline.onModuleDestroy();
    await jest.advanceTimersByTimeAsync(1_500);
    deadline.start(); // a later hook: the clock keeps its first start
    expect(deadline.started).toBe(true);
    expect(deadline.graceEndsAt).toBe(1_000_000 + GRACE_MS);
    expect(deadline.endsAt).toBe(1_000_000 + BOUND_MS);
  });

  it('gives up a wait that never settles at the shared deadline, however late the wait began', async () => {
    const deadline = new ShutdownDeadline({ shutdownGraceMs: GRACE_MS });
    deadline.start();
    await jest.advanceTimersByTimeAsync(3_000); // earlier hooks used most of the budget
    const wait = track(deadline.settledBy(new Promise(() => undefined)));
    await jest.advanceTimersByTimeAsync(BOUND_MS - 3_000 - 1);
    expect(wait.settled).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    expect(wait.settled).toBe(true);
  });

  it('never waits past the deadline, even when asked to wait longer, and not at all once it passed', async () => {
    const deadline = new ShutdownDeadline({ shutdownGraceMs: GRACE_MS });
    deadline.start();
    const longer = track(deadline.settledBy(new Promise(() => undefined), Date.now() + 60_000));
    await jest.advanceTimersByTimeAsync(BOUND_MS);
    expect(longer.settled).toBe(true);
    const late = track(deadline.settledBy(new Promise(() => undefined)));
    await jest.advanceTimersByTimeAsync(0);
    expect(late.settled).toBe(true);
  });

  it('ends a wait at an earlier instant when given one, and as soon as the work settles', async () => {
    const deadline = new ShutdownDeadline({ shutdownGraceMs: GRACE_MS });
    deadline.start();
    const grace = track(deadline.settledBy(new Promise(() => undefined), deadline.graceEndsAt));
    await jest.advanceTimersByTimeAsync(GRACE_MS);
    expect(grace.settled).toBe(true);
    const failing = track(deadline.settledBy(Promise.reject(new Error('database gone'))));
    await jest.advanceTimersByTimeAsync(0);
    expect(failing.settled).toBe(true); // a failed step is over, not an error of shutdown
  });

  it('starts the clock itself when a step waits before any hook started it', async () => {
    const deadline = new ShutdownDeadline({ shutdownGraceMs: GRACE_MS });
    const wait = track(deadline.settledBy(new Promise(() => undefined)));
    expect(deadline.endsAt).toBe(1_000_000 + BOUND_MS);
    await jest.advanceTimersByTimeAsync(BOUND_MS);
    expect(wait.settled).toBe(true);
  });
});
