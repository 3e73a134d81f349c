import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { Types } from 'mongoose';
import { MAX_RENEWALS_PER_COMMAND, RenewalBatcher } from '../../../lib/lease/renewal-batcher';
import type { LogBatch } from '../../../lib/model/job-log';
import type {
  LeaseOwner,
  LeaseRenewal,
  LeaseRenewalStore,
  LeaseRenewalsResult,
} from '../../../lib/persistence/job-lease.store';

const T0 = Date.UTC(2030, 0, 1);
const at = (ms: number) => new Date(T0 + ms);

/** One call the fake store received; the test settles it when it wants. */
interface StoreCall<T> {
  readonly args: unknown[];
  resolve(value: T): void;
  reject(error: unknown): void;
}

function call<T>(args: unknown[], calls: StoreCall<T>[]): Promise<T> {
  return new Promise<T>((resolve, reject) => calls.push({ args, resolve, reject }));
}

/** A controllable lease store: every call is recorded and stays pending until the test settles it. */
class FakeStore implements LeaseRenewalStore {
  readonly single: StoreCall<Date | null>[] = [];
  readonly batches: StoreCall<LeaseRenewalsResult>[] = [];
  readonly reads: StoreCall<LeaseOwner[]>[] = [];

  renewLease(
    id: Types.ObjectId,
    lockId: string,
    requestedUntil: Date,
    now: Date,
    progress?: unknown,
    _leaseMs?: number,
    logs?: LogBatch,
  ): Promise<Date | null> {
    const args: unknown[] = [id, lockId, requestedUntil, now];
    if (progress !== undefined) args.push(progress);
    if (logs !== undefined) args.push({ logs });
    return call(args, this.single);
  }

  renewLeases(renewals: LeaseRenewal[], now: Date): Promise<LeaseRenewalsResult> {
    return call([renewals, now], this.batches);
  }

  readLeaseOwners(ids: Types.ObjectId[]): Promise<LeaseOwner[]> {
    return call([ids], this.reads);
  }

  renewalsOf(batch: number): LeaseRenewal[] {
    return this.batches[batch].args[0] as LeaseRenewal[];
  }
}

/** Lets every settled promise chain run (native promises are not faked). */
const settle = async () => {
  for (let i = 0; i < 10; i += 1) await Promise.resolve();
};

/** Keeps the thread busy (no event loop turn) for `ms` of wall time. */
function holdThreadFor(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // busy on purpose
  }
}

/** Records how each call of a batch ended, without an unhandled rejection. */
function outcomes(promises: Promise<Date | null>[]): { value: Date | null | undefined; error?: unknown }[] {
  const results: { value: Date | null | undefined; error?: unknown }[] = promises.map(() => ({ value: undefined }));
  promises.forEach((promise, i) => {
    promise.then(
      (value) => {
        results[i].value = value;
      },
      (error: unknown) => {
        results[i].error = error;
      },
    );
  });
  return results;
}

describe('RenewalBatcher', () => {
  let store: FakeStore;
  let batcher: RenewalBatcher;
  const ids = Array.from({ length: 6 }, () => new Types.ObjectId());

  beforeEach(() => {
    jest.useFakeTimers({ now: T0 });
    store = new FakeStore();
    batcher = new RenewalBatcher(store, () => new Date(Date.now()));
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('sends a lone renewal as the single-row write and resolves its exact answer', async () => {
    const result = outcomes([batcher.renew(ids[0], 'w#1', at(30_000))]);
    expect(store.single).toHaveLength(0); // not before the flush
    jest.advanceTimersByTime(0);
    expect(store.single.map((c) => c.args)).toEqual([[ids[0], 'w#1', at(30_000), at(0)]]);
    expect(store.batches).toHaveLength(0);
    store.single[0].resolve(at(45_000));
    await settle();
    expect(result[0].value).toEqual(at(45_000));
  });

  it('carries a progress value with its renewal, alone or in a command, and none where none was given', async () => {
    void batcher.renew(ids[0], 'w#0', at(30_000), { done: 3 });
    jest.advanceTimersByTime(0);
    expect(store.single.map((c) => c.args)).toEqual([[ids[0], 'w#0', at(30_000), at(0), { done: 3 }]]);

    void batcher.renew(ids[1], 'w#1', at(30_000), 42);
    void batcher.renew(ids[2], 'w#2', at(30_000));
    jest.advanceTimersByTime(0);
    expect(store.renewalsOf(0).map(({ lockId, progress }) => ({ lockId, progress }))).toEqual([
      { lockId: 'w#1', progress: 42 },
      { lockId: 'w#2', progress: undefined },
    ]);
  });

  it('carries logged lines with their renewal, alone or in a command', () => {
    const logs = { lines: [{ at: at(0), attempt: 1, message: 'hello' }], count: 1 };
    void batcher.renew(ids[0], 'w#0', at(30_000), undefined, undefined, logs);
    jest.advanceTimersByTime(0);
    expect(store.single.map((c) => c.args)).toEqual([[ids[0], 'w#0', at(30_000), at(0), { logs }]]);

    void batcher.renew(ids[1], 'w#1', at(30_000), undefined, undefined, logs);
    void batcher.renew(ids[2], 'w#2', at(30_000));
    jest.advanceTimersByTime(0);
    expect(store.renewalsOf(0).map((renewal) => renewal.logs)).toEqual([logs, undefined]);
  });

  it('sends every renewal due in one timers phase as one command, owner-fenced per call', async () => {
    for (const [i, id] of ids.slice(0, 3).entries()) {
      setTimeout(() => void batcher.renew(id, `w#${i}`, at(1_000 + 30_000)), 1_000);
    }
    jest.advanceTimersByTime(1_000);
    expect(store.batches).toHaveLength(0);
    // Fake timers put an immediate scheduled from a timer callback 1 ms later, not in the same advance.
    jest.advanceTimersByTime(1);
    expect(store.batches).toHaveLength(1);
    expect(store.renewalsOf(0).map(({ id, lockId, requestedUntil }) => ({ id, lockId, requestedUntil }))).toEqual([
      { id: ids[0], lockId: 'w#0', requestedUntil: at(31_000) },
      { id: ids[1], lockId: 'w#1', requestedUntil: at(31_000) },
      { id: ids[2], lockId: 'w#2', requestedUntil: at(31_000) },
    ]);
    expect(store.batches[0].args[1]).toEqual(at(1_001)); // the writer's clock when the command is sent
  });

  it('coalesces renewals from real timers firing together, though microtasks run between their callbacks', async () => {
    jest.useRealTimers();
    const store = new FakeStore();
    const batcher = new RenewalBatcher(store, () => new Date());
    const requested = new Date(Date.now() + 30_000);
    const sent = new Promise<void>((resolve) => {
      // Node drains microtasks after each timer callback: a microtask flush would send three commands.
      for (const [i, id] of ids.slice(0, 3).entries()) setTimeout(() => void batcher.renew(id, `w#${i}`, requested), 1);
      setTimeout(() => setImmediate(resolve), 1);
      // Node stamps each timer with the loop's clock when it is created, which may cross a millisecond between them;
      // holding the thread past every timer's due time makes them all fire in the same timers phase.
      holdThreadFor(3);
    });
    await sent;
    expect(store.single).toHaveLength(0);
    expect(store.batches).toHaveLength(1);
    expect(store.renewalsOf(0).map((r) => r.lockId)).toEqual(['w#0', 'w#1', 'w#2']);
  });

  it('sends renewals of different macrotasks in different commands', () => {
    void batcher.renew(ids[0], 'w#0', at(30_000));
    void batcher.renew(ids[1], 'w#1', at(30_000));
    jest.advanceTimersByTime(0);
    void batcher.renew(ids[2], 'w#2', at(30_000));
    void batcher.renew(ids[3], 'w#3', at(30_000));
    jest.advanceTimersByTime(0);
    expect(store.batches.map((_, b) => store.renewalsOf(b).map((r) => r.lockId))).toEqual([
      ['w#0', 'w#1'],
      ['w#2', 'w#3'],
    ]);
  });

  it('resolves every call with its requested deadline when every row matched, without a read', async () => {
    const promises = [batcher.renew(ids[0], 'w#0', at(30_000)), batcher.renew(ids[1], 'w#1', at(40_000))];
    const result = outcomes(promises);
    jest.advanceTimersByTime(0);
    store.batches[0].resolve({ matched: 2, refused: new Map() });
    await settle();
    expect(result.map((r) => r.value)).toEqual([at(30_000), at(40_000)]);
    expect(store.reads).toHaveLength(0);
  });

  it('decides each call by one read when fewer rows matched: lost, run out or not ours resolve null', async () => {
    const requested = at(30_000);
    const result = outcomes(ids.map((id, i) => batcher.renew(id, `w#${i}`, requested)));
    jest.advanceTimersByTime(0);
    store.batches[0].resolve({ matched: 2, refused: new Map() });
    await settle();
    expect(store.reads).toHaveLength(1);
    expect(store.reads[0].args[0]).toEqual(ids);
    store.reads[0].resolve([
      { _id: ids[0], lockedBy: 'w#0', status: 'running', lockedUntil: at(35_000) }, // renewed (further by another write)
      { _id: ids[1], lockedBy: 'w#1', status: 'running', lockedUntil: requested }, // renewed
      { _id: ids[2], lockedBy: 'other#9', status: 'running', lockedUntil: at(60_000) }, // taken over
      { _id: ids[3], lockedBy: 'w#3', status: 'running', lockedUntil: at(-1) }, // ran out by the writer's clock
      { _id: ids[4], lockedBy: 'w#4', status: 'cancelled', lockedUntil: at(35_000) }, // no longer running
      // ids[5]: the row is gone
    ]);
    await settle();
    expect(result.map((r) => r.value)).toEqual([at(35_000), requested, null, null, null, null]);
    expect(result.every((r) => r.error === undefined)).toBe(true);
  });

  it("does not count a row short of the request, or run out by the writer's clock, as renewed", async () => {
    const result = outcomes([
      batcher.renew(ids[0], 'w#0', at(30_000)),
      batcher.renew(ids[1], 'w#1', at(30_000)),
      batcher.renew(ids[2], 'w#2', at(-5_000)), // asks for a deadline already past: the filter needs one ahead
    ]);
    jest.advanceTimersByTime(0);
    store.batches[0].resolve({ matched: 1, refused: new Map() });
    await settle();
    store.reads[0].resolve([
      { _id: ids[0], lockedBy: 'w#0', status: 'running', lockedUntil: at(30_000) },
      { _id: ids[1], lockedBy: 'w#1', status: 'running', lockedUntil: at(20_000) }, // the write did not land
      { _id: ids[2], lockedBy: 'w#2', status: 'running', lockedUntil: at(-1_000) }, // run out by the writer's clock
    ]);
    await settle();
    expect(result.map((r) => r.value)).toEqual([at(30_000), null, null]);
  });

  it('rejects every call of the command with the same error object when the whole command fails', async () => {
    const result = outcomes(ids.slice(0, 3).map((id, i) => batcher.renew(id, `w#${i}`, at(30_000))));
    jest.advanceTimersByTime(0);
    const networkError = new Error('connection reset');
    store.batches[0].reject(networkError);
    await settle();
    expect(result.map((r) => r.error)).toEqual([networkError, networkError, networkError]);
    for (const r of result) expect(r.error).toBe(networkError);
    expect(store.reads).toHaveLength(0);
  });

  it('rejects only the calls whose own write was refused; the read decides the others', async () => {
    const result = outcomes(ids.slice(0, 3).map((id, i) => batcher.renew(id, `w#${i}`, at(30_000))));
    jest.advanceTimersByTime(0);
    const refusal = new Error('document update error');
    store.batches[0].resolve({ matched: 1, refused: new Map([[1, refusal]]) });
    await settle();
    expect(store.reads[0].args[0]).toEqual([ids[0], ids[2]]);
    store.reads[0].resolve([
      { _id: ids[0], lockedBy: 'w#0', status: 'running', lockedUntil: at(30_000) },
      { _id: ids[2], lockedBy: 'other#1', status: 'running', lockedUntil: at(30_000) },
    ]);
    await settle();
    expect(result[0]).toEqual({ value: at(30_000) });
    expect(result[1].error).toBe(refusal);
    expect(result[2]).toEqual({ value: null });
  });

  it('rejects the undecided calls with the read error when the follow-up read fails', async () => {
    const result = outcomes(ids.slice(0, 2).map((id, i) => batcher.renew(id, `w#${i}`, at(30_000))));
    jest.advanceTimersByTime(0);
    store.batches[0].resolve({ matched: 1, refused: new Map() });
    await settle();
    const readError = new Error('read timed out');
    store.reads[0].reject(readError);
    await settle();
    expect(result.map((r) => r.error)).toEqual([readError, readError]);
  });

  it('never puts two renewals of one lease in one command: the second goes in the next one', async () => {
    const result = outcomes([
      batcher.renew(ids[0], 'w#0', at(30_000)),
      batcher.renew(ids[1], 'w#1', at(30_000)),
      batcher.renew(ids[0], 'w#0', at(31_000)),
    ]);
    jest.advanceTimersByTime(0);
    expect(store.batches).toHaveLength(1);
    expect(store.renewalsOf(0).map((r) => r.requestedUntil)).toEqual([at(30_000), at(30_000)]);
    expect(store.single).toHaveLength(0);
    jest.advanceTimersByTime(1); // the next flush (1 ms later under fake timers): a command of its own
    expect(store.single.map((c) => c.args[2])).toEqual([at(31_000)]);
    store.batches[0].resolve({ matched: 2, refused: new Map() });
    store.single[0].resolve(at(31_000));
    await settle();
    expect(result.map((r) => r.value)).toEqual([at(30_000), at(30_000), at(31_000)]);
  });

  it(`sends at most ${MAX_RENEWALS_PER_COMMAND} renewals per command, all commands in the same flush`, async () => {
    const count = MAX_RENEWALS_PER_COMMAND * 2 + 5;
    const promises = Array.from({ length: count }, (_, i) => batcher.renew(new Types.ObjectId(), `w#${i}`, at(30_000)));
    const result = outcomes(promises);
    jest.advanceTimersByTime(0);
    expect(store.batches.map((_, b) => store.renewalsOf(b).length)).toEqual([
      MAX_RENEWALS_PER_COMMAND,
      MAX_RENEWALS_PER_COMMAND,
      5,
    ]);
    for (const [b, batch] of store.batches.entries()) {
      batch.resolve({ matched: store.renewalsOf(b).length, refused: new Map() });
    }
    await settle();
    expect(result.every((r) => r.value?.getTime() === at(30_000).getTime())).toBe(true);
  });
});
