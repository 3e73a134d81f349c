import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { HeartbeatClock, type HeartbeatListener } from '../../../lib/lease/heartbeat-clock';
import { Lease } from '../../../lib/lease/lease';

const T0 = 1_000_000;

function listener(log: string[], name: string): HeartbeatListener {
  return { onHeartbeat: () => log.push(`${name}@${Date.now() - T0}`) };
}

describe('HeartbeatClock', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: T0 });
  });
  afterEach(() => {
    jest.clearAllTimers();
    jest.useRealTimers();
  });

  it('beats a lone listener exactly on time', async () => {
    const log: string[] = [];
    new HeartbeatClock().schedule(T0 + 100, 10, listener(log, 'a'));
    await jest.advanceTimersByTimeAsync(99);
    expect(log).toEqual([]);
    await jest.advanceTimersByTimeAsync(1);
    expect(log).toEqual(['a@100']);
  });

  it('lets beats due within `earlyMs` after an open bucket join it: one timer, one timers phase, at most that early', async () => {
    const clock = new HeartbeatClock();
    const log: string[] = [];
    for (let i = 0; i <= 10; i += 1) clock.schedule(T0 + 100 + i, 10, listener(log, `j${i}`));
    clock.schedule(T0 + 111, 10, listener(log, 'late')); // 11 ms after the bucket: too early to join
    expect(jest.getTimerCount()).toBe(2);
    await jest.advanceTimersByTimeAsync(100);
    expect(log).toEqual(Array.from({ length: 11 }, (_, i) => `j${i}@100`));
    await jest.advanceTimersByTimeAsync(11);
    expect(log.at(-1)).toBe('late@111');
  });

  it('never beats a listener late to join a bucket, and clears the timer when the last listener leaves', async () => {
    const clock = new HeartbeatClock();
    const log: string[] = [];
    const first = clock.schedule(T0 + 100, 10, listener(log, 'a'));
    const second = clock.schedule(T0 + 95, 10, listener(log, 'b')); // due before the bucket: a bucket of its own
    expect(jest.getTimerCount()).toBe(2);
    first.cancel();
    second.cancel();
    expect(jest.getTimerCount()).toBe(0);
    await jest.advanceTimersByTimeAsync(200);
    expect(log).toEqual([]);
  });

  it('beats every other listener of a bucket when one throws, and reports the throw', async () => {
    const errors: unknown[] = [];
    const clock = new HeartbeatClock(undefined, (error) => errors.push(error));
    const log: string[] = [];
    clock.schedule(T0 + 100, 10, {
      onHeartbeat: () => {
        throw new Error('lease bug');
      },
    });
    clock.schedule(T0 + 100, 10, listener(log, 'b'));
    await jest.advanceTimersByTimeAsync(100);
    expect(log).toEqual(['b@100']);
    expect(errors).toEqual([expect.objectContaining({ message: 'lease bug' })]);
  });
});

describe('Leases on one HeartbeatClock', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: T0 });
  });
  afterEach(() => {
    jest.clearAllTimers();
    jest.useRealTimers();
  });

  const open = (clock: HeartbeatClock, writes: number[], i: number) =>
    new Lease({
      jobId: `job-${i}`,
      lockId: `lock-${i}`,
      lockedUntil: new Date(Date.now() + 3_000),
      heartbeatIntervalMs: 1_000,
      leaseMs: 3_000,
      heartbeatClock: clock,
      renew: async (until) => {
        writes.push(Date.now() - T0);
        return until;
      },
      onStale: () => undefined,
    });

  it('100 jobs claimed over 90 ms share one beat timer, and those that end before it need no timer at all', async () => {
    const clock = new HeartbeatClock();
    const writes: number[] = [];
    const leases: Lease[] = [];
    for (let i = 0; i < 100; i += 1) {
      const lease = open(clock, writes, i);
      lease.start();
      leases.push(lease);
      if (i % 10 === 9) await jest.advanceTimersByTimeAsync(10);
    }
    // No watchdog and no pipeline yet: one timer for all of them.
    expect(jest.getTimerCount()).toBe(1);
    for (const lease of leases.slice(50)) lease.close();
    await jest.advanceTimersByTimeAsync(1_000);
    // The 50 live ones beat together (the first was due at 1000, the last at 1090), then each has its watchdog.
    expect(writes).toHaveLength(50);
    expect(new Set(writes)).toEqual(new Set([1_000]));
    // One watchdog per live lease, and their next beats (due together again) share one timer.
    expect(jest.getTimerCount()).toBe(50 + 1);
    for (const lease of leases) lease.close();
    expect(jest.getTimerCount()).toBe(0);
  });

  it('all jobs closed before their first beat leave no timer behind', async () => {
    const clock = new HeartbeatClock();
    const writes: number[] = [];
    const leases = Array.from({ length: 20 }, (_, i) => open(clock, writes, i));
    for (const lease of leases) lease.start();
    for (const lease of leases) lease.close();
    expect(jest.getTimerCount()).toBe(0);
    await jest.advanceTimersByTimeAsync(5_000);
    expect(writes).toEqual([]);
  });
});
