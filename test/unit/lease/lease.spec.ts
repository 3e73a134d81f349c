import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { Lease, type LeaseConfig } from '../../../lib/lease/lease';
import { LOG_FLUSH_LINES } from '../../../lib/lease/log-buffer';
import { InvalidDurationError } from '../../../lib/model/errors/invalid-duration.error';
import { JobCancelledError } from '../../../lib/model/errors/job-cancelled.error';
import { LeaseLostError } from '../../../lib/model/errors/lease-lost.error';
import { type LogBatch, MAX_LOG_LINES } from '../../../lib/model/job-log';

const T0 = 1_000_000;

/** One renewal write as seen by the fake store; the test decides how and when it settles. */
interface StoreWrite {
  readonly index: number;
  readonly requestedUntil: number;
  /** The progress value the write carries, if any. */
  readonly progress: unknown;
  /** The logged lines the write carries, if any. */
  readonly logs: LogBatch | undefined;
  readonly startedAt: number;
  settled: boolean;
  /** Applies `max(row, requestedUntil)` and resolves the new row value (or null when not owned). */
  succeed(): void;
  fail(error: unknown): void;
}

type AutoResponse = { delayMs: number; fail?: unknown };

/**
 * A controllable lease store: each write can be left blocked, resolved, failed or delayed, and every
 * start/end is logged with the (fake) time, so ordering and concurrency can be asserted.
 */
class FakeStore {
  row: number;
  owned = true;
  /** When set, a write that does not match answers that the job was cancelled (the row says `cancelled`). */
  cancelled = false;
  /** When set, the lockedUntil the store returns instead of the row (a misbehaving store). */
  returnOverride: number | undefined;
  /** How new writes respond; undefined leaves them blocked until the test settles them. */
  auto: AutoResponse | ((index: number) => AutoResponse | undefined) | undefined;
  readonly writes: StoreWrite[] = [];
  readonly log: string[] = [];
  concurrent = 0;
  maxConcurrent = 0;

  constructor(lockedUntil: number) {
    this.row = lockedUntil;
  }

  /** The progress value on the row (set by each write that carries one and matches). */
  progress: unknown;

  readonly renew = (requestedUntil: Date, progress?: unknown, logs?: LogBatch): Promise<Date | null | 'cancelled'> =>
    new Promise<Date | null | 'cancelled'>((resolve, reject) => {
      const index = this.writes.length;
      this.concurrent += 1;
      this.maxConcurrent = Math.max(this.maxConcurrent, this.concurrent);
      this.log.push(`start ${index} @${Date.now() - T0}`);
      const finish = (): void => {
        this.concurrent -= 1;
        this.log.push(`end ${index} @${Date.now() - T0}`);
        write.settled = true;
      };
      const write: StoreWrite = {
        index,
        requestedUntil: requestedUntil.getTime(),
        progress,
        logs,
        startedAt: Date.now(),
        settled: false,
        succeed: () => {
          if (write.settled) throw new Error(`write ${index} already settled`);
          finish();
          if (this.cancelled) return resolve('cancelled');
          if (!this.owned) return resolve(null);
          this.row = Math.max(this.row, requestedUntil.getTime());
          if (progress !== undefined) this.progress = progress;
          resolve(new Date(this.returnOverride ?? this.row));
        },
        fail: (error) => {
          if (write.settled) throw new Error(`write ${index} already settled`);
          finish();
          reject(error);
        },
      };
      this.writes.push(write);
      const auto = typeof this.auto === 'function' ? this.auto(index) : this.auto;
      if (!auto) return;
      const respond = (): void => (auto.fail === undefined ? write.succeed() : write.fail(auto.fail));
      if (auto.delayMs > 0) setTimeout(respond, auto.delayMs);
      else respond();
    });

  get last(): StoreWrite {
    const write = this.writes.at(-1);
    if (!write) throw new Error('no write yet');
    return write;
  }
}

/** Lets every queued promise continuation run (native promises are not faked by jest). */
async function flush(): Promise<void> {
  for (let i = 0; i < 50; i++) await Promise.resolve();
}

type Outcome = { state: 'pending' } | { state: 'resolved' } | { state: 'rejected'; reason: unknown };

/** Observes a promise without awaiting it (and marks its rejection handled). */
function track(promise: Promise<void>): { readonly outcome: Outcome } {
  const tracked: { outcome: Outcome } = { outcome: { state: 'pending' } };
  promise.then(
    () => {
      tracked.outcome = { state: 'resolved' };
    },
    (reason: unknown) => {
      tracked.outcome = { state: 'rejected', reason };
    },
  );
  return tracked;
}

function setup(overrides: Partial<LeaseConfig> & { claimMs?: number } = {}) {
  const { claimMs = 30_000, ...config } = overrides;
  const store = new FakeStore(Date.now() + claimMs);
  const onStale = jest.fn<(error: LeaseLostError) => void>();
  const onRenewed = jest.fn<(lockedUntil: Date) => void>();
  const onCancelled = jest.fn<(error: JobCancelledError) => void>();
  const lease = new Lease({
    jobId: 'job-1',
    lockId: 'lock-1',
    lockedUntil: new Date(store.row),
    heartbeatIntervalMs: 3_600_000, // out of the way unless a test is about the heartbeat
    leaseMs: 30_000,
    renew: store.renew,
    onStale,
    onRenewed,
    onCancelled,
    ...config,
  });
  return { lease, store, onStale, onRenewed, onCancelled };
}

describe('Lease', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: T0 });
  });

  afterEach(() => {
    jest.clearAllTimers();
    jest.useRealTimers();
  });

  describe('single-flight pipeline', () => {
    it('serialises overlapping requests: a later write starts, and so completes, only after the earlier one', async () => {
      const { lease, store } = setup();
      store.auto = (index) => ({ delayMs: index === 0 ? 50 : 1 });
      lease.start();

      const first = track(lease.extend(100));
      await jest.advanceTimersByTimeAsync(10);
      const second = track(lease.extend(200));
      await jest.advanceTimersByTimeAsync(10);
      const third = track(lease.extend(150));
      expect(store.writes).toHaveLength(1);

      await jest.advanceTimersByTimeAsync(100);
      await flush();

      expect(store.log).toEqual(['start 0 @0', 'end 0 @50', 'start 1 @50', 'end 1 @51']);
      expect(store.maxConcurrent).toBe(1);
      expect([store.writes.length, store.maxConcurrent]).toEqual([2, 1]);
      expect(store.writes[1].requestedUntil).toBe(T0 + 50 + 200);
      expect([first, second, third].map((p) => p.outcome.state)).toEqual(['resolved', 'resolved', 'resolved']);
      lease.close();
    });

    it('coalesces 100 requests made during a blocked write into one follow-up with the longest duration', async () => {
      const { lease, store } = setup();
      lease.start();
      const first = track(lease.extend(100));
      expect(store.writes).toHaveLength(1);
      expect(store.writes[0].requestedUntil).toBe(T0 + 100);

      // 200…299 in rotated order, so the longest is neither the first nor the last asked for.
      const durations = Array.from({ length: 100 }, (_, i) => 200 + ((i + 37) % 100));
      const promises = durations.map((ms) => lease.extend(ms));
      const burst = promises.map(track);
      // Everyone who joined the waiting request shares one promise: nothing grows with the burst.
      expect(new Set(promises).size).toBe(1);
      await flush();
      expect(store.writes).toHaveLength(1);

      jest.advanceTimersByTime(10);
      store.writes[0].succeed();
      await flush();
      expect(first.outcome.state).toBe('resolved');
      expect(store.writes).toHaveLength(2);
      // Measured from the start of the follow-up write, not from when it was requested.
      expect(store.writes[1].startedAt).toBe(T0 + 10);
      expect(store.writes[1].requestedUntil).toBe(T0 + 10 + 299);
      expect(burst.every((p) => p.outcome.state === 'pending')).toBe(true);

      jest.advanceTimersByTime(5);
      store.writes[1].succeed();
      await flush();
      expect(burst.every((p) => p.outcome.state === 'resolved')).toBe(true);
      expect(store.writes).toHaveLength(2);
      expect(store.maxConcurrent).toBe(1);
      expect(lease.expiresAt.getTime()).toBe(T0 + 30_000); // the claim's deadline is later still
      lease.close();
    });

    it('keeps state constant-size: a 10,000-request burst causes at most 2 writes', async () => {
      const { lease, store } = setup();
      lease.start();
      const promises = Array.from({ length: 10_000 }, (_, i) => lease.extend(1 + (i % 5_000)));
      const tracked = promises.map(track);
      expect(new Set(promises).size).toBe(2); // the in-flight request and the single waiting one

      store.last.succeed();
      await flush();
      store.last.succeed();
      await flush();

      expect(store.writes).toHaveLength(2);
      expect(store.writes[1].requestedUntil).toBe(T0 + 5_000);
      expect(store.maxConcurrent).toBe(1);
      expect(tracked.every((p) => p.outcome.state === 'resolved')).toBe(true);
      lease.close();
    });

    it("writes a request made from the in-flight write's settlement (.then) as one more write", async () => {
      const { lease, store } = setup();
      lease.start();
      let followUp: { readonly outcome: Outcome } | undefined;
      lease.extend(100).then(() => {
        followUp = track(lease.extend(500));
      });

      jest.advanceTimersByTime(7);
      store.writes[0].succeed();
      await flush();
      expect(followUp?.outcome.state).toBe('pending');
      expect(store.writes).toHaveLength(2);
      expect(store.writes[1].requestedUntil).toBe(T0 + 7 + 500);

      store.writes[1].succeed();
      await flush();
      expect(followUp?.outcome.state).toBe('resolved');
      expect(store.writes).toHaveLength(2);
      lease.close();
    });

    // Sweeps the window in which exhaustMap still holds the finishing write and would drop a trigger.
    it.each(Array.from({ length: 12 }, (_, hops) => hops))(
      'writes a request made %i microtask(s) after the in-flight write lands',
      async (hops) => {
        const { lease, store } = setup();
        lease.start();
        const first = track(lease.extend(100));
        let followUp: { readonly outcome: Outcome } | undefined;
        store.writes[0].succeed();
        void (async () => {
          for (let i = 0; i < hops; i++) await Promise.resolve();
          followUp = track(lease.extend(400));
        })();
        await flush();

        expect(first.outcome.state).toBe('resolved');
        expect(store.writes).toHaveLength(2);
        expect(store.writes[1].requestedUntil).toBe(T0 + 400);
        store.writes[1].succeed();
        await flush();
        expect(followUp?.outcome.state).toBe('resolved');
        expect([store.writes.length, store.maxConcurrent]).toEqual([2, 1]);
        lease.close();
      },
    );

    it('writes a request made synchronously from onRenewed, while exhaustMap still holds the write', async () => {
      const { lease, store, onRenewed } = setup();
      let followUp: { readonly outcome: Outcome } | undefined;
      onRenewed.mockImplementationOnce(() => {
        followUp = track(lease.extend(250));
      });
      lease.start();
      void lease.extend(100);
      store.writes[0].succeed();
      await flush();

      expect(store.writes).toHaveLength(2);
      expect(store.writes[1].requestedUntil).toBe(T0 + 250);
      store.writes[1].succeed();
      await flush();
      expect(followUp?.outcome.state).toBe('resolved');
      lease.close();
    });

    it('writes a request made synchronously from inside the renewer (re-entrant trigger)', async () => {
      const store = new FakeStore(T0 + 30_000);
      let inner: { readonly outcome: Outcome } | undefined;
      const lease: Lease = new Lease({
        jobId: 'job-1',
        lockId: 'lock-1',
        lockedUntil: new Date(store.row),
        heartbeatIntervalMs: 3_600_000,
        leaseMs: 30_000,
        onStale: () => {},
        renew: (requestedUntil) => {
          if (!inner) inner = track(lease.extend(300));
          return store.renew(requestedUntil);
        },
      });
      lease.start();
      const outer = track(lease.extend(100));
      expect(store.writes).toHaveLength(1);
      store.writes[0].succeed();
      await flush();
      expect(outer.outcome.state).toBe('resolved');
      expect(store.writes).toHaveLength(2);
      expect(store.writes[1].requestedUntil).toBe(T0 + 300);
      store.writes[1].succeed();
      await flush();
      expect(inner?.outcome.state).toBe('resolved');
      expect([store.writes.length, store.maxConcurrent]).toEqual([2, 1]);
      lease.close();
    });

    it('drains write by write: each follow-up carries exactly what coalesced during the write before it, then the pipeline is free', async () => {
      const { lease, store } = setup();
      lease.start();
      const first = track(lease.extend(100));
      // While write 0 is in flight: durations and a progress value coalesce into one waiting request.
      const duringFirst = [lease.extend(300), lease.updateProgress(5), lease.extend(200)].map(track);
      jest.advanceTimersByTime(4);
      store.writes[0].succeed();
      await flush();
      expect(first.outcome.state).toBe('resolved');
      expect(store.writes).toHaveLength(2);
      // leaseMs (30 s, asked by the progress) is the longest of the three.
      expect(store.writes[1]).toMatchObject({ startedAt: T0 + 4, requestedUntil: T0 + 4 + 30_000, progress: 5 });

      // While write 1 is in flight: a new waiting request, which starts from nothing (not from what write 1 took).
      const duringSecond = [lease.extend(50), lease.extend(80)].map(track);
      jest.advanceTimersByTime(6);
      store.writes[1].succeed();
      await flush();
      expect(duringFirst.map((p) => p.outcome.state)).toEqual(['resolved', 'resolved', 'resolved']);
      expect(store.writes).toHaveLength(3);
      expect(store.writes[2]).toMatchObject({ startedAt: T0 + 10, requestedUntil: T0 + 10 + 80, progress: undefined });

      store.writes[2].succeed();
      await flush();
      expect(duringSecond.map((p) => p.outcome.state)).toEqual(['resolved', 'resolved']);
      expect(store.writes).toHaveLength(3); // nothing was waiting: no further write
      expect(store.maxConcurrent).toBe(1);

      // The drain has ended and released the pipeline: the next request is written at once, not after a follow-up.
      void lease.extend(10);
      expect(store.writes).toHaveLength(4);
      lease.close();
    });

    it('drains nothing when stopRenewing() refused the waiting request during the write', async () => {
      const { lease, store } = setup();
      lease.start();
      const inFlight = track(lease.extend(100));
      const waiting = track(lease.extend(200));
      lease.stopRenewing();
      await flush();
      expect(waiting.outcome).toMatchObject({ state: 'rejected', reason: expect.any(LeaseLostError) });
      store.writes[0].succeed(); // the write in flight still lands
      await flush();
      expect(inFlight.outcome.state).toBe('resolved');
      expect(store.writes).toHaveLength(1);
      lease.close();
      expect(jest.getTimerCount()).toBe(0);
    });

    it('close() while running out: the write in flight resolves, the watchdog is disarmed, never stale', async () => {
      const { lease, store, onStale } = setup({ claimMs: 300, heartbeatIntervalMs: 100, leaseMs: 300 });
      lease.start();
      const inFlight = track(lease.extend(100));
      lease.stopRenewing();
      expect(jest.getTimerCount()).toBe(1); // the watchdog, armed by stopRenewing(); no beat
      lease.close();
      await flush();
      expect(inFlight.outcome.state).toBe('resolved');
      expect(jest.getTimerCount()).toBe(0);
      store.writes[0].succeed();
      await jest.advanceTimersByTimeAsync(1_000);
      expect(onStale).not.toHaveBeenCalled();
      expect(lease.isStale).toBe(false);
      expect(store.writes).toHaveLength(1);
    });

    it('a write that fails before start() schedules no beat: start() then schedules exactly one', async () => {
      const { lease, store } = setup({ claimMs: 300, heartbeatIntervalMs: 100, leaseMs: 300 });
      store.auto = { delayMs: 0, fail: new Error('down') };
      await expect(lease.extend(100)).rejects.toThrow('down');
      expect(jest.getTimerCount()).toBe(0);
      store.auto = { delayMs: 0 };
      lease.start();
      expect(jest.getTimerCount()).toBe(1); // the first beat (the watchdog comes with it)
      await jest.advanceTimersByTimeAsync(100);
      expect(store.writes.map((write) => write.startedAt - T0)).toEqual([0, 100]);
      await jest.advanceTimersByTimeAsync(100);
      expect(store.writes.map((write) => write.startedAt - T0)).toEqual([0, 100, 200]);
      lease.close();
      expect(jest.getTimerCount()).toBe(0);
    });
  });

  describe('progress', () => {
    it('coalesces 10,000 progress updates made while a write is blocked: at most 2 writes, the latest value wins', async () => {
      const { lease, store } = setup();
      lease.start();
      const first = track(lease.updateProgress(0));
      expect(store.writes).toHaveLength(1);
      const burst = Array.from({ length: 10_000 }, (_, i) => track(lease.updateProgress({ done: i + 1 })));
      await flush();
      expect(store.writes).toHaveLength(1);

      store.writes[0].succeed();
      await flush();
      expect(first.outcome.state).toBe('resolved');
      expect(store.writes).toHaveLength(2);
      expect(store.writes[1].progress).toEqual({ done: 10_000 });
      store.writes[1].succeed();
      await flush();

      expect(burst.every((p) => p.outcome.state === 'resolved')).toBe(true);
      expect(store.writes).toHaveLength(2);
      expect(store.progress).toEqual({ done: 10_000 });
      expect(store.maxConcurrent).toBe(1);
      lease.close();
    });

    it('rides a waiting renewal: one write carries the longest duration and the latest progress', async () => {
      const { lease, store } = setup();
      lease.start();
      void lease.extend(100);
      const renewal = track(lease.extend(50_000)); // longer than the leaseMs a progress request asks for
      const progress = track(lease.updateProgress(40));
      const later = track(lease.updateProgress(60));
      jest.advanceTimersByTime(3);
      store.writes[0].succeed();
      await flush();

      expect(store.writes).toHaveLength(2);
      expect(store.writes[0].progress).toBeUndefined();
      expect(store.writes[1]).toMatchObject({ requestedUntil: T0 + 3 + 50_000, progress: 60 });
      store.writes[1].succeed();
      await flush();
      expect([renewal, progress, later].map((p) => p.outcome.state)).toEqual(['resolved', 'resolved', 'resolved']);
      expect(store.writes).toHaveLength(2);
      lease.close();
    });

    it('shares one write with a heartbeat that comes due while the progress waits', async () => {
      const { lease, store } = setup({ heartbeatIntervalMs: 100, leaseMs: 300, claimMs: 300 });
      lease.start();
      void lease.extend(50); // blocked in flight
      const progress = track(lease.updateProgress(7));
      await jest.advanceTimersByTimeAsync(100); // the beat joins the waiting request
      expect(store.writes).toHaveLength(1);
      store.writes[0].succeed();
      await flush();
      expect(store.writes).toHaveLength(2);
      expect(store.writes[1]).toMatchObject({ progress: 7, requestedUntil: T0 + 100 + 300 });
      store.writes[1].succeed();
      await flush();
      expect(progress.outcome.state).toBe('resolved');
      lease.close();
    });

    it('after close() writes nothing and resolves; after stale or stopRenewing() rejects with LeaseLostError', async () => {
      const closed = setup();
      closed.lease.start();
      closed.lease.close();
      await expect(closed.lease.updateProgress(5)).resolves.toBeUndefined();
      expect(closed.store.writes).toHaveLength(0);

      const stale = setup();
      stale.lease.start();
      stale.store.owned = false;
      const lost = track(stale.lease.updateProgress(5));
      stale.store.last.succeed();
      await flush();
      expect(lost.outcome).toMatchObject({ state: 'rejected', reason: expect.any(LeaseLostError) });
      await expect(stale.lease.updateProgress(6)).rejects.toBeInstanceOf(LeaseLostError);
      expect(stale.store.writes).toHaveLength(1);

      const stopped = setup();
      stopped.lease.start();
      stopped.lease.stopRenewing();
      await expect(stopped.lease.updateProgress(5)).rejects.toBeInstanceOf(LeaseLostError);
      expect(stopped.store.writes).toHaveLength(0);
      stopped.lease.close();
    });

    it('reports each landed progress write to onProgress with the value written', async () => {
      const onProgress = jest.fn<(value: unknown) => void>();
      const { lease, store } = setup({ onProgress });
      lease.start();
      void lease.updateProgress(1);
      void lease.updateProgress(2);
      void lease.updateProgress(3);
      void lease.extend(100);
      store.writes[0].succeed();
      await flush();
      store.writes[1].succeed();
      await flush();
      expect(onProgress.mock.calls).toEqual([[1], [3]]);
      lease.close();
    });
  });

  describe('logs', () => {
    const line = (message: string) => ({ at: new Date(), attempt: 1, message });

    it('waits for the next write: lines logged meanwhile ride on it, never a write per line', async () => {
      const { lease, store } = setup();
      store.auto = { delayMs: 5 };
      lease.start();
      for (let i = 0; i < 10; i++) lease.log(line(`l${i}`));
      await flush();
      expect(store.writes).toHaveLength(0);
      const extended = track(lease.extend(1_000));
      await jest.advanceTimersByTimeAsync(10);
      expect(extended.outcome.state).toBe('resolved');
      expect(store.writes).toHaveLength(1);
      expect(store.last.logs?.count).toBe(10);
      expect(store.last.logs?.lines.map((l) => l.message)).toEqual(Array.from({ length: 10 }, (_, i) => `l${i}`));
      expect(await lease.takeLogsForOutcome()).toBeUndefined();
    });

    it(`asks for a write of its own once ${LOG_FLUSH_LINES} lines wait; lines logged during it go in one follow-up`, async () => {
      const { lease, store } = setup();
      lease.start();
      for (let i = 0; i < LOG_FLUSH_LINES; i++) lease.log(line(`a${i}`));
      await flush();
      expect(store.writes).toHaveLength(1);
      expect(store.last.logs?.count).toBe(LOG_FLUSH_LINES);
      for (let i = 0; i < 3 * LOG_FLUSH_LINES; i++) lease.log(line(`b${i}`));
      await flush();
      expect(store.writes).toHaveLength(1); // single-flight: the first is still in the air
      store.last.succeed();
      await flush();
      expect(store.writes).toHaveLength(2);
      expect(store.last.logs?.count).toBe(3 * LOG_FLUSH_LINES);
      expect(store.maxConcurrent).toBe(1);
    });

    it('keeps at most MAX_LOG_LINES waiting (the newest), and counts the dropped ones', async () => {
      const { lease, store } = setup();
      lease.start();
      // A write in the air (left blocked) took the first lines; what is logged meanwhile waits for the follow-up.
      for (let i = 0; i < LOG_FLUSH_LINES; i++) lease.log(line(`first${i}`));
      await flush();
      expect(store.writes).toHaveLength(1);
      for (let i = 0; i < MAX_LOG_LINES + 30; i++) lease.log(line(`m${i}`));
      const taken = lease.takeLogsForOutcome();
      store.last.succeed(); // the write in the air lands; the follow-up it starts carries no line now
      const batch = await taken;
      expect(store.writes.slice(1).map((write) => write.logs)).toEqual([undefined]);
      expect(batch?.count).toBe(MAX_LOG_LINES + 30);
      expect(batch?.lines).toHaveLength(MAX_LOG_LINES);
      expect(batch?.lines[0].message).toBe('m30');
    });

    it('puts the lines of a failed write back, before the newer ones, for the next write', async () => {
      const { lease, store } = setup();
      lease.start();
      lease.log(line('first'));
      const failed = track(lease.extend(1_000));
      await flush();
      lease.log(line('second'));
      store.last.fail(new Error('connection reset'));
      await flush();
      expect(failed.outcome.state).toBe('rejected');
      expect(await lease.takeLogsForOutcome()).toEqual({ lines: [line('first'), line('second')], count: 2 });
    });

    it('gives the outcome the lines of a renewal in flight that then fails, and none of one that lands', async () => {
      const failing = setup();
      failing.lease.start();
      for (let i = 0; i < LOG_FLUSH_LINES; i++) failing.lease.log(line(`f${i}`));
      await flush();
      failing.lease.log(line('tail'));
      const forOutcome = failing.lease.takeLogsForOutcome();
      failing.store.last.fail(new Error('connection reset'));
      const batch = await forOutcome;
      expect(batch?.count).toBe(LOG_FLUSH_LINES + 1);
      expect(batch?.lines.at(-1)?.message).toBe('tail');

      const landing = setup();
      landing.lease.start();
      for (let i = 0; i < LOG_FLUSH_LINES; i++) landing.lease.log(line(`l${i}`));
      await flush();
      landing.lease.log(line('tail'));
      const rest = landing.lease.takeLogsForOutcome();
      landing.store.last.succeed();
      expect(await rest).toEqual({ lines: [line('tail')], count: 1 });
    });

    it('asks for no write of its own while a failed write is backing off: lines wait for the retry', async () => {
      const { lease, store } = setup();
      store.auto = { delayMs: 0, fail: new Error('connection reset') };
      lease.start();
      for (let i = 0; i < LOG_FLUSH_LINES; i++) lease.log(line(`a${i}`));
      await flush();
      expect(store.writes).toHaveLength(1);
      for (let i = 0; i < 100; i++) lease.log(line(`b${i}`));
      await flush();
      expect(store.writes).toHaveLength(1); // not one write per line
      store.auto = { delayMs: 0 };
      await jest.advanceTimersByTimeAsync(5_000); // the retry's backoff
      expect(store.writes).toHaveLength(2);
      expect(store.last.logs?.count).toBe(LOG_FLUSH_LINES + 100);
    });

    it('drops lines once the lease is running out, lost or closed: the row is no longer its to write', async () => {
      const { lease } = setup();
      lease.start();
      lease.stopRenewing();
      lease.log(line('late'));
      expect(await lease.takeLogsForOutcome()).toBeUndefined();
      const closed = setup().lease;
      closed.close();
      closed.log(line('after'));
      expect(await closed.takeLogsForOutcome()).toBeUndefined();
    });
  });

  describe('automatic heartbeat', () => {
    it('writes every heartbeatIntervalMs asking for leaseMs from the write start', async () => {
      const { lease, store, onRenewed } = setup({ heartbeatIntervalMs: 100, leaseMs: 300, claimMs: 300 });
      store.auto = { delayMs: 0 };
      lease.start();
      expect(store.writes).toHaveLength(0);

      for (let beat = 1; beat <= 5; beat++) {
        await jest.advanceTimersByTimeAsync(100);
        expect(store.writes).toHaveLength(beat);
        expect(store.last.startedAt).toBe(T0 + beat * 100);
        expect(store.last.requestedUntil).toBe(T0 + beat * 100 + 300);
      }
      expect(lease.expiresAt.getTime()).toBe(T0 + 800);
      expect(onRenewed).toHaveBeenCalledTimes(5);
      expect(onRenewed).toHaveBeenLastCalledWith(new Date(T0 + 800));
      expect(lease.isStale).toBe(false);
      lease.close();
    });

    it('times the first renewal from the claim, not from start(): a slow claim answer does not delay it', async () => {
      // Claimed at T0 − 70 (the answer took 70 ms), so the lease runs to T0 + 230 and the first beat is due at T0 + 30.
      const { lease, store } = setup({ heartbeatIntervalMs: 100, leaseMs: 300, claimMs: 230 });
      store.auto = { delayMs: 0 };
      lease.start();
      await jest.advanceTimersByTimeAsync(29);
      expect(store.writes).toHaveLength(0);
      await jest.advanceTimersByTimeAsync(1);
      expect(store.writes.map((w) => w.startedAt)).toEqual([T0 + 30]);
      await jest.advanceTimersByTimeAsync(100);
      expect(store.writes.map((w) => w.startedAt)).toEqual([T0 + 30, T0 + 130]);
      lease.close();
      expect(jest.getTimerCount()).toBe(0);
    });

    it('renews a claim that wrote a shorter lease than the handler’s at the same fraction of it, asking for the handler’s', async () => {
      // The claim locked the row for the module's 300 ms at T0; this handler's lease is 900 ms (interval 300 ms).
      const { lease, store } = setup({ heartbeatIntervalMs: 300, leaseMs: 900, claimMs: 300, claimedAt: new Date(T0) });
      store.auto = { delayMs: 0 };
      lease.start();
      await jest.advanceTimersByTimeAsync(99);
      expect(store.writes).toHaveLength(0);
      await jest.advanceTimersByTimeAsync(1);
      expect(store.writes.map((w) => [w.startedAt - T0, w.requestedUntil - T0])).toEqual([[100, 1_000]]);
      await jest.advanceTimersByTimeAsync(300);
      expect(store.writes).toHaveLength(2); // then the handler's own interval
      expect(lease.isStale).toBe(false);
      lease.close();
    });

    it('renews at once when the first interval after the claim has already passed', async () => {
      const { lease, store } = setup({ heartbeatIntervalMs: 100, leaseMs: 300, claimMs: 150 }); // claimed at T0 − 150
      store.auto = { delayMs: 0 };
      lease.start();
      await jest.advanceTimersByTimeAsync(0);
      expect(store.writes.map((w) => w.startedAt)).toEqual([T0]);
      lease.close();
    });

    it('shares the pipeline with extend(): ticks during a slow write coalesce into one follow-up', async () => {
      const { lease, store } = setup({ heartbeatIntervalMs: 100, leaseMs: 300, claimMs: 1_000 });
      lease.start();
      const extended = track(lease.extend(50));
      await jest.advanceTimersByTimeAsync(450); // four ticks while the write is blocked
      expect(store.writes).toHaveLength(1);

      store.writes[0].succeed();
      await flush();
      expect(extended.outcome.state).toBe('resolved');
      expect(store.writes).toHaveLength(2);
      expect(store.writes[1].requestedUntil).toBe(T0 + 450 + 300);
      expect(store.maxConcurrent).toBe(1);
      lease.close();
    });
  });

  describe('watchdog', () => {
    it('arms the watchdog at the first beat, for the claim deadline (a job that ends before it needs no timer)', async () => {
      const { lease, onStale } = setup({ claimMs: 500, heartbeatIntervalMs: 100, leaseMs: 500 });
      lease.start(); // the store leaves every heartbeat write hanging
      expect(jest.getTimerCount()).toBe(1); // the first beat only: no watchdog yet
      await jest.advanceTimersByTimeAsync(100);
      expect(jest.getTimerCount()).toBe(2); // the next beat, and now the watchdog
      await jest.advanceTimersByTimeAsync(399);
      expect(lease.isStale).toBe(false);
      await jest.advanceTimersByTimeAsync(1);
      expect(lease.isStale).toBe(true);
      expect(onStale).toHaveBeenCalledTimes(1);
      expect(onStale.mock.calls[0][0]).toBeInstanceOf(LeaseLostError);
      expect(onStale.mock.calls[0][0]).toMatchObject({ reason: 'expired', jobId: 'job-1', lockId: 'lock-1' });
    });

    it('lets database latency eat into the lease: write at t0, response at t0+40, 100ms → stale at t0+100', async () => {
      const { lease, store, onStale, onRenewed } = setup({ claimMs: 60 });
      store.auto = { delayMs: 40 };
      lease.start();
      const extended = track(lease.extend(100));
      expect(store.writes[0].requestedUntil).toBe(T0 + 100);

      await jest.advanceTimersByTimeAsync(40);
      expect(extended.outcome.state).toBe('resolved');
      expect(onRenewed).toHaveBeenCalledWith(new Date(T0 + 100));
      expect(lease.expiresAt.getTime()).toBe(T0 + 100);

      await jest.advanceTimersByTimeAsync(59); // t0+99, past the claim's t0+60
      expect(lease.isStale).toBe(false);
      await jest.advanceTimersByTimeAsync(1); // t0+100
      expect(lease.isStale).toBe(true);
      expect(onStale).toHaveBeenCalledTimes(1);
      expect(onStale.mock.calls[0][0].reason).toBe('expired');
    });

    it('lets a hung renewal go stale at the old deadline, and a late success does not revive it', async () => {
      const { lease, store, onStale, onRenewed } = setup({ claimMs: 100 });
      lease.start();
      await jest.advanceTimersByTimeAsync(10);
      const extended = track(lease.extend(1_000));
      expect(jest.getTimerCount()).toBe(2); // the beat and the watchdog: a write in flight never disarms it

      await jest.advanceTimersByTimeAsync(89); // t0+99
      expect(lease.isStale).toBe(false);
      await jest.advanceTimersByTimeAsync(1); // t0+100: the claim's deadline
      expect(lease.isStale).toBe(true);
      expect(onStale).toHaveBeenCalledTimes(1);
      const staleError = onStale.mock.calls[0][0];
      expect(extended.outcome).toEqual({ state: 'rejected', reason: staleError });

      store.writes[0].succeed(); // lands after the deadline
      await flush();
      expect(lease.isStale).toBe(true);
      expect(lease.expiresAt.getTime()).toBe(T0 + 100);
      expect(onRenewed).not.toHaveBeenCalled();
      expect(jest.getTimerCount()).toBe(0);
      await jest.advanceTimersByTimeAsync(10_000);
      expect(onStale).toHaveBeenCalledTimes(1);
    });

    it('hands back a renewal that landed after the watchdog ended the lease, so the row is not held for nobody', async () => {
      const relinquish = jest.fn<(until: Date) => Promise<void>>(async () => undefined);
      const { lease, store } = setup({ claimMs: 100, relinquish });
      lease.start();
      track(lease.extend(1_000));
      await jest.advanceTimersByTimeAsync(100); // stale at the claim's deadline, the write still in flight
      expect(lease.isStale).toBe(true);
      store.writes[0].succeed(); // the server moved lockedUntil to t0+1000 after all
      await flush();
      expect(relinquish).toHaveBeenCalledTimes(1);
      expect(relinquish.mock.calls[0][0].getTime()).toBe(T0 + 100);
    });

    it('stopRenewing(): no further writes, extend() is refused, and the lease runs out at its deadline', async () => {
      const { lease, store, onStale } = setup({ claimMs: 300, heartbeatIntervalMs: 100, leaseMs: 300 });
      store.auto = { delayMs: 0 };
      lease.start();
      await jest.advanceTimersByTimeAsync(100); // one heartbeat: deadline t0+400
      expect(store.writes).toHaveLength(1);
      lease.stopRenewing();
      await expect(lease.extend(1_000)).rejects.toBeInstanceOf(LeaseLostError);
      await jest.advanceTimersByTimeAsync(299);
      expect(store.writes).toHaveLength(1);
      expect(lease.isStale).toBe(false);
      await jest.advanceTimersByTimeAsync(1);
      expect(lease.isStale).toBe(true);
      expect(onStale.mock.calls[0][0].reason).toBe('expired');
      expect(jest.getTimerCount()).toBe(0);
    });

    it('stopRenewing() before start(): no beat timer at all, and the lease runs out at its deadline', async () => {
      const { lease, store, onStale } = setup({ claimMs: 300, heartbeatIntervalMs: 100, leaseMs: 300 });
      lease.stopRenewing();
      lease.start();
      expect(jest.getTimerCount()).toBe(1); // the watchdog only
      await jest.advanceTimersByTimeAsync(299);
      expect(store.writes).toHaveLength(0);
      expect(lease.isStale).toBe(false);
      await jest.advanceTimersByTimeAsync(1);
      expect(onStale).toHaveBeenCalledTimes(1);
      expect(jest.getTimerCount()).toBe(0);
    });

    it('goes stale at once when a renewal lands after the deadline, before the timer could run', async () => {
      let clock = T0;
      const { lease, store, onStale, onRenewed } = setup({ claimMs: 100, now: () => clock });
      lease.start();
      const extended = track(lease.extend(50));
      clock = T0 + 150; // the clock moved past the deadline; the store's own max keeps t0+100
      store.writes[0].succeed();
      await flush();

      expect(lease.isStale).toBe(true);
      expect(onStale).toHaveBeenCalledTimes(1);
      expect(extended.outcome).toEqual({ state: 'rejected', reason: onStale.mock.calls[0][0] });
      expect(onRenewed).not.toHaveBeenCalled();
      expect(jest.getTimerCount()).toBe(0);
    });

    it('keeps a lease longer than the platform timer limit (2^31-1 ms) live until its deadline', async () => {
      const days40 = 40 * 24 * 3_600_000;
      const { lease, store, onStale } = setup({ claimMs: days40, heartbeatIntervalMs: days40 });
      lease.start();
      expect(jest.getTimerCount()).toBe(1); // the first beat, at the timer limit; it arms the watchdog
      await jest.advanceTimersByTimeAsync(2 ** 31 - 1);
      expect(jest.getTimerCount()).toBe(2);
      await jest.advanceTimersByTimeAsync(days40 - 1 - (2 ** 31 - 1));
      expect(lease.isStale).toBe(false);
      expect(store.writes).toHaveLength(1); // the heartbeat is clamped to the limit too, not fired every 1 ms
      expect(jest.getTimerCount()).toBe(2); // still one watchdog (plus the heartbeat)
      await jest.advanceTimersByTimeAsync(1);
      expect(lease.isStale).toBe(true);
      expect(onStale).toHaveBeenCalledTimes(1);
    });

    it('never shortens the local deadline, whatever the store returns', async () => {
      const { lease, store } = setup({ claimMs: 1_000 });
      store.returnOverride = T0 + 200;
      store.auto = { delayMs: 0 };
      lease.start();
      await expect(lease.extend(200)).resolves.toBeUndefined();
      expect(lease.expiresAt.getTime()).toBe(T0 + 1_000);
      lease.close();
    });
  });

  describe('terminal states', () => {
    it('close() during a write: no timer afterwards, nothing written, never stale, outstanding callers resolve', async () => {
      const { lease, store, onStale, onRenewed } = setup({ claimMs: 100, heartbeatIntervalMs: 30, leaseMs: 100 });
      lease.start();
      await jest.advanceTimersByTimeAsync(30); // the first beat arms the watchdog; its write hangs
      const inFlight = track(lease.extend(500));
      const waiting = track(lease.extend(600));
      expect(jest.getTimerCount()).toBe(2); // next beat + watchdog

      lease.close();
      await flush();
      expect(inFlight.outcome.state).toBe('resolved');
      expect(waiting.outcome.state).toBe('resolved');
      expect(jest.getTimerCount()).toBe(0);

      store.writes[0].succeed(); // the in-flight write lands after close
      await flush();
      expect(jest.getTimerCount()).toBe(0);
      expect(onRenewed).not.toHaveBeenCalled();
      expect(lease.expiresAt.getTime()).toBe(T0 + 100);

      await expect(lease.extend(100)).resolves.toBeUndefined();
      await jest.advanceTimersByTimeAsync(10_000);
      expect(store.writes).toHaveLength(1);
      expect(onStale).not.toHaveBeenCalled();
      expect(lease.isStale).toBe(false);
      lease.close(); // idempotent
      expect(jest.getTimerCount()).toBe(0);
    });

    it('close() during a write that then fails or loses ownership changes nothing', async () => {
      for (const outcome of ['fail', 'lost'] as const) {
        const { lease, store, onStale } = setup({ claimMs: 100 });
        lease.start();
        const inFlight = track(lease.extend(500));
        lease.close();
        store.owned = outcome !== 'lost';
        if (outcome === 'fail') store.writes[0].fail(new Error('late'));
        else store.writes[0].succeed();
        await flush();
        expect(inFlight.outcome.state).toBe('resolved');
        expect(onStale).not.toHaveBeenCalled();
        expect(lease.isStale).toBe(false);
        expect(jest.getTimerCount()).toBe(0);
      }
    });

    it('stale during a write: no timer afterwards, no second stale callback, callers reject', async () => {
      const { lease, store, onStale } = setup({ claimMs: 100, heartbeatIntervalMs: 30, leaseMs: 100 });
      store.auto = (index) => (index === 0 ? { delayMs: 0 } : undefined); // then every write hangs
      lease.start();
      await jest.advanceTimersByTimeAsync(30); // first heartbeat lands: deadline t0+130
      expect(lease.expiresAt.getTime()).toBe(T0 + 130);
      await jest.advanceTimersByTimeAsync(30); // second heartbeat hangs
      const waiting = track(lease.extend(1_000));

      await jest.advanceTimersByTimeAsync(70); // t0+130
      expect(lease.isStale).toBe(true);
      expect(onStale).toHaveBeenCalledTimes(1);
      expect(waiting.outcome).toEqual({ state: 'rejected', reason: onStale.mock.calls[0][0] });
      expect(jest.getTimerCount()).toBe(0);

      store.writes[1].succeed();
      await flush();
      await jest.advanceTimersByTimeAsync(10_000);
      expect(store.writes).toHaveLength(2);
      expect(onStale).toHaveBeenCalledTimes(1);
      expect(jest.getTimerCount()).toBe(0);
      lease.close(); // after stale: still stale, nothing armed
      expect(lease.isStale).toBe(true);
      expect(jest.getTimerCount()).toBe(0);
    });

    it('lost ownership with concurrent requests: 1 write, stale exactly once, 0 timers, later requests write nothing', async () => {
      const { lease, store, onStale, onRenewed } = setup({ heartbeatIntervalMs: 100 });
      store.owned = false;
      lease.start();
      const requests = [lease.extend(100), lease.extend(200), lease.extend(300)].map(track);
      expect(store.writes).toHaveLength(1);

      store.writes[0].succeed(); // matches no row → null
      await flush();
      expect(onStale).toHaveBeenCalledTimes(1);
      const error = onStale.mock.calls[0][0];
      expect(error).toBeInstanceOf(LeaseLostError);
      expect(error.reason).toBe('taken-over');
      expect(lease.isStale).toBe(true);
      for (const request of requests) expect(request.outcome).toEqual({ state: 'rejected', reason: error });
      expect(jest.getTimerCount()).toBe(0);

      await expect(lease.extend(100)).rejects.toBe(error);
      await jest.advanceTimersByTimeAsync(60_000);
      expect(store.writes).toHaveLength(1);
      expect(onStale).toHaveBeenCalledTimes(1);
      expect(onRenewed).not.toHaveBeenCalled();
    });
  });

  describe('cancelled job', () => {
    it('a renewal that finds the job cancelled ends the lease as cancelled, not lost: every call rejects with it', async () => {
      const { lease, store, onStale, onCancelled } = setup({ claimMs: 300, heartbeatIntervalMs: 100, leaseMs: 300 });
      store.auto = { delayMs: 0 };
      lease.start();
      store.cancelled = true;
      const refused = track(lease.updateProgress(50));
      await flush();
      expect(refused.outcome).toEqual({ state: 'rejected', reason: expect.any(JobCancelledError) });
      const reason = (refused.outcome as { reason: JobCancelledError }).reason;
      expect(onCancelled).toHaveBeenCalledTimes(1);
      expect(onCancelled).toHaveBeenCalledWith(reason);
      expect(onStale).not.toHaveBeenCalled();
      expect(lease.isCancelled).toBe(true);
      expect(lease.isStale).toBe(true);
      await expect(lease.extend(1_000)).rejects.toBe(reason);
      await expect(lease.updateProgress(60)).rejects.toBe(reason);
      await expect(lease.lost).resolves.toBe(reason);
      // Nothing is written any more, and no timer is left: the row is no longer this execution's.
      await jest.advanceTimersByTimeAsync(10_000);
      expect(store.writes).toHaveLength(1);
      expect(jest.getTimerCount()).toBe(0);
    });

    it('cancel() rejects the outstanding calls with its reason and stops the heartbeat, without telling onStale', async () => {
      const { lease, store, onStale, onCancelled } = setup({ claimMs: 300, heartbeatIntervalMs: 100, leaseMs: 300 });
      lease.start();
      const inFlight = track(lease.extend(500));
      const waiting = track(lease.updateProgress(10));
      const reason = new JobCancelledError('job-1');
      lease.cancel(reason);
      await flush();
      expect(inFlight.outcome).toEqual({ state: 'rejected', reason });
      expect(waiting.outcome).toEqual({ state: 'rejected', reason });
      await expect(lease.extend(1_000)).rejects.toBe(reason);
      store.writes[0].succeed(); // the write in flight lands late: it changes nothing
      await jest.advanceTimersByTimeAsync(10_000);
      expect(store.writes).toHaveLength(1);
      expect(onStale).not.toHaveBeenCalled();
      expect(onCancelled).not.toHaveBeenCalled();
      expect(jest.getTimerCount()).toBe(0);
      lease.cancel(new JobCancelledError('job-1')); // once only
      await expect(lease.lost).resolves.toBe(reason);
    });

    it('records the claim’s lease until one of its renewals has landed, its own from then on', async () => {
      const claimedAt = new Date(T0);
      const { lease, store } = setup({ claimMs: 30_000, leaseMs: 90_000, heartbeatIntervalMs: 30_000, claimedAt });
      store.auto = { delayMs: 5 };
      lease.start();
      expect(lease.recordedLeaseMs).toBe(30_000);
      const renewal = track(lease.extend(1_000));
      await jest.advanceTimersByTimeAsync(1);
      expect(lease.recordedLeaseMs).toBe(30_000); // sent, not landed
      await jest.advanceTimersByTimeAsync(10);
      expect(renewal.outcome.state).toBe('resolved');
      expect(lease.recordedLeaseMs).toBe(90_000);
    });
  });

  describe('run ended by its own write', () => {
    it("closes quietly when a renewal finds the run ended by this lock's own outcome write: never stale", async () => {
      const { lease, store, onStale } = setup({ claimMs: 300, heartbeatIntervalMs: 100, leaseMs: 300 });
      const renew = jest.fn(async () => 'finished' as const);
      const finished = new Lease({
        jobId: 'job-2',
        lockId: 'lock-2',
        lockedUntil: new Date(store.row),
        heartbeatIntervalMs: 100,
        leaseMs: 300,
        renew,
        onStale,
      });
      finished.start();
      const extended = track(finished.extend(100));
      await flush();
      expect(extended.outcome).toEqual({ state: 'resolved' });
      await jest.advanceTimersByTimeAsync(1_000);
      expect(renew).toHaveBeenCalledTimes(1);
      expect(finished.isStale).toBe(false);
      expect(onStale).not.toHaveBeenCalled();
      lease.close();
      expect(jest.getTimerCount()).toBe(0);
    });
  });

  describe('database errors', () => {
    it('gives every caller of the failed write the same error object, stays live, then goes stale at the deadline', async () => {
      const { lease, store, onStale } = setup({ claimMs: 300, heartbeatIntervalMs: 100, leaseMs: 300 });
      lease.start();
      const first = track(lease.extend(100));
      const burst = [lease.extend(200), lease.extend(250), lease.extend(220)].map(track);

      const firstError = new Error('write 0 failed');
      store.writes[0].fail(firstError);
      await flush();
      expect(first.outcome).toEqual({ state: 'rejected', reason: firstError });
      expect(store.writes).toHaveLength(2);

      const burstError = new Error('write 1 failed');
      store.writes[1].fail(burstError);
      await flush();
      for (const request of burst) {
        expect(request.outcome.state).toBe('rejected');
        expect((request.outcome as { reason: unknown }).reason).toBe(burstError);
      }
      expect(lease.isStale).toBe(false);
      expect(jest.getTimerCount()).toBe(1); // the beat only: the watchdog is armed by the first beat, at t0+100

      store.auto = { delayMs: 0, fail: new Error('still down') };
      await jest.advanceTimersByTimeAsync(299); // retries every 25 ms (a quarter interval) fail
      expect(store.writes.length).toBeGreaterThan(4);
      expect(store.maxConcurrent).toBe(1);
      expect(lease.isStale).toBe(false);
      await jest.advanceTimersByTimeAsync(1); // t0+300: nothing landed
      expect(lease.isStale).toBe(true);
      expect(onStale).toHaveBeenCalledTimes(1);
      expect(onStale.mock.calls[0][0].reason).toBe('expired');
      expect(jest.getTimerCount()).toBe(0);
    });

    it('keeps the execution live when a later renewal succeeds before the deadline', async () => {
      const { lease, store, onStale } = setup({ claimMs: 300, heartbeatIntervalMs: 100, leaseMs: 300 });
      store.auto = { delayMs: 0, fail: new Error('down') };
      lease.start();
      await expect(lease.extend(100)).rejects.toThrow('down');
      await jest.advanceTimersByTimeAsync(100); // the retries and the heartbeat fail
      expect(lease.isStale).toBe(false);

      store.auto = { delayMs: 0 };
      await jest.advanceTimersByTimeAsync(25); // the next retry, at t0+125, lands: t0+425
      expect(lease.expiresAt.getTime()).toBe(T0 + 425);
      store.auto = undefined; // later renewals hang
      await jest.advanceTimersByTimeAsync(299); // t0+424
      expect(lease.isStale).toBe(false);
      await jest.advanceTimersByTimeAsync(1); // t0+425
      expect(lease.isStale).toBe(true);
      expect(onStale).toHaveBeenCalledTimes(1);
    });

    it('retries a failed renewal after 50 ms, doubling, at most a quarter interval; a landing resets the backoff', async () => {
      const { lease, store, onStale } = setup({ claimMs: 9_000, heartbeatIntervalMs: 3_000, leaseMs: 9_000 });
      lease.start();
      store.auto = { delayMs: 0, fail: new Error('down') };
      await jest.advanceTimersByTimeAsync(3_000 + 50 + 100 + 200 + 400 + 750 + 750);
      const starts = store.writes.map((write) => write.startedAt - T0);
      expect(starts).toEqual([3_000, 3_050, 3_150, 3_350, 3_750, 4_500, 5_250]);
      store.auto = { delayMs: 0 };
      await jest.advanceTimersByTimeAsync(750); // lands at t0+6000
      expect(lease.expiresAt.getTime()).toBe(T0 + 6_000 + 9_000);
      store.auto = (index) => (index === 8 ? { delayMs: 0, fail: new Error('blip') } : { delayMs: 0 });
      await jest.advanceTimersByTimeAsync(3_000 + 50); // the next beat fails once, its retry 50 ms later lands
      expect(store.writes.slice(8).map((write) => write.startedAt - T0)).toEqual([9_000, 9_050]);
      expect(lease.expiresAt.getTime()).toBe(T0 + 9_050 + 9_000);
      expect(store.maxConcurrent).toBe(1);
      expect(onStale).not.toHaveBeenCalled();
    });

    it('keeps a 3 s lease through renewal errors for 1.1 s over two heartbeats (issue 26)', async () => {
      const { lease, store, onStale } = setup({ claimMs: 3_000, heartbeatIntervalMs: 1_000, leaseMs: 3_000 });
      store.auto = () => {
        const at = Date.now() - T0;
        return at >= 950 && at < 2_050 ? { delayMs: 0, fail: new Error('down') } : { delayMs: 0 };
      };
      lease.start();
      await jest.advanceTimersByTimeAsync(4_000);
      expect(lease.isStale).toBe(false);
      expect(onStale).not.toHaveBeenCalled();
      const landed = store.writes.filter((write) => write.startedAt - T0 >= 2_050)[0];
      expect(landed.startedAt - T0).toBeLessThanOrEqual(2_050 + 250); // one backoff wait after the window at most
    });

    it('never sends a renewal past its own deadline: a write due after it goes stale instead', async () => {
      let clock = T0;
      const { lease, store, onStale } = setup({
        claimMs: 100,
        heartbeatIntervalMs: 50,
        leaseMs: 100,
        now: () => clock,
      });
      lease.start();
      clock = T0 + 100; // the deadline, before the watchdog timer could run
      const extended = track(lease.extend(50));
      await flush();
      expect(store.writes).toHaveLength(0);
      expect(lease.isStale).toBe(true);
      expect(onStale.mock.calls[0][0].reason).toBe('expired');
      expect(extended.outcome).toEqual({ state: 'rejected', reason: onStale.mock.calls[0][0] });
    });
  });

  describe('validation', () => {
    it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, '100' as unknown as number])(
      'rejects extend(%p) with InvalidDurationError and writes nothing',
      async (ms) => {
        const { lease, store } = setup();
        lease.start();
        await expect(lease.extend(ms)).rejects.toBeInstanceOf(InvalidDurationError);
        await flush();
        expect(store.writes).toHaveLength(0);
        // Nothing was left waiting either: the next valid request writes its own duration.
        void lease.extend(10);
        expect(store.last.requestedUntil).toBe(T0 + 10);
        lease.close();
      },
    );

    it('rejects a non-positive heartbeat interval or lease duration at construction', () => {
      expect(() => setup({ heartbeatIntervalMs: 0 })).toThrow(InvalidDurationError);
      expect(() => setup({ leaseMs: Number.NaN })).toThrow(InvalidDurationError);
    });
  });

  it('unrefs its timers so a live lease never holds the process open', () => {
    const { lease } = setup();
    const unrefs: unknown[] = [];
    const setTimeoutSpy = jest.spyOn(globalThis, 'setTimeout');
    const setIntervalSpy = jest.spyOn(globalThis, 'setInterval');
    lease.start();
    for (const spy of [setTimeoutSpy, setIntervalSpy]) {
      for (const result of spy.mock.results) {
        const timer = result.value as { hasRef?: () => boolean };
        unrefs.push(timer.hasRef?.());
      }
    }
    setTimeoutSpy.mockRestore();
    setIntervalSpy.mockRestore();
    expect(unrefs).toEqual([false, false]);
    lease.close();
  });
});
