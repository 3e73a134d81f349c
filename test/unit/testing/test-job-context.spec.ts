import { describe, expect, it } from '@jest/globals';
import { Types } from 'mongoose';
import {
  InvalidOptionError,
  JobCancelledError,
  type JobExecutionContext,
  JobTimeoutError,
  LeaseLostError,
} from '../../../lib';
import { JobExecution } from '../../../lib/execution/job-execution';
import type { RegisteredJobHandler } from '../../../lib/handlers/registered-job-handler';
import { Lease } from '../../../lib/lease/lease';
import type { JobDocument } from '../../../lib/model/job-document';
import { MAX_LOG_LINE_BYTES } from '../../../lib/model/job-log';
import { createTestJobContext } from '../../../lib/testing';

const LEASE_MS = 30_000;

/** The context a real execution hands its handler (a lease whose writes always land), to compare rejections with. */
function realContext(): JobExecutionContext {
  const doc = {
    _id: new Types.ObjectId(),
    name: 'real',
    payload: null,
    status: 'running',
    attemptCount: 0,
    maxAttempts: 1,
    fencingToken: 1,
  } as unknown as JobDocument;
  const lease = new Lease({
    jobId: doc._id.toHexString(),
    lockId: 'lock-1',
    lockedUntil: new Date(Date.now() + LEASE_MS),
    heartbeatIntervalMs: LEASE_MS / 3,
    leaseMs: LEASE_MS,
    renew: async (requestedUntil) => requestedUntil,
    onStale: () => undefined,
  });
  const handler = { name: doc.name, handler: () => undefined, leaseMs: LEASE_MS } as unknown as RegisteredJobHandler;
  return new JobExecution({ doc, lockId: 'lock-1' }, handler, doc._id.toHexString(), lease).context;
}

/** What a promise rejected with: its class and message. */
async function rejectionOf(promise: Promise<unknown>): Promise<{ type: string; message: string }> {
  try {
    await promise;
  } catch (error) {
    return { type: (error as Error).constructor.name, message: (error as Error).message };
  }
  throw new Error('expected a rejection');
}

describe('createTestJobContext', () => {
  it('describes a first attempt of a job, with a live signal and a lease in the future', () => {
    const ctx = createTestJobContext();
    expect(ctx.jobId).toMatch(/^[0-9a-f]{24}$/);
    expect(ctx.name).toEqual(expect.any(String));
    expect(ctx.attempt).toBe(1);
    expect(ctx.fencingToken).toBe(1);
    expect(ctx.lockId).toEqual(expect.any(String));
    expect(ctx.signal.aborted).toBe(false);
    expect(ctx.isStale).toBe(false);
    expect(ctx.leaseExpiresAt.getTime()).toBeGreaterThan(Date.now());
    expect(ctx.extendLockTimeCalls).toEqual([]);
    expect(ctx.progressUpdates).toEqual([]);
  });

  it('takes overrides for the identity of the execution', () => {
    const jobId = new Types.ObjectId().toHexString();
    const ctx = createTestJobContext({ jobId, name: 'email.send', attempt: 3, fencingToken: 7, lockId: 'w#9' });
    expect(ctx).toMatchObject({ jobId, name: 'email.send', attempt: 3, fencingToken: 7, lockId: 'w#9' });
  });

  it.each([
    [{ attempt: 0 }, 'attempt'],
    [{ attempt: 1.5 }, 'attempt'],
    [{ fencingToken: -1 }, 'fencingToken'],
    [{ jobId: 'not-an-id' }, 'jobId'],
    [{ name: '' }, 'name'],
  ])('refuses the override %j with InvalidOptionError naming %s', (overrides, option) => {
    expect(() => createTestJobContext(overrides)).toThrow(InvalidOptionError);
    expect(() => createTestJobContext(overrides)).toThrow(option);
  });

  it('records extendLockTime and updateProgress calls in order, and moves the lease forward', async () => {
    const ctx = createTestJobContext();
    const before = ctx.leaseExpiresAt.getTime();
    await ctx.extendLockTime(10_000);
    await ctx.extendLockTime(3_600_000);
    await ctx.updateProgress(10);
    const progress = { done: 1, total: 2 };
    await ctx.updateProgress(progress);
    progress.done = 2; // what the handler changes afterwards is not what it reported
    expect(ctx.extendLockTimeCalls).toEqual([10_000, 3_600_000]);
    expect(ctx.progressUpdates).toEqual([10, { done: 1, total: 2 }]);
    expect(ctx.leaseExpiresAt.getTime()).toBeGreaterThanOrEqual(before);
    expect(ctx.leaseExpiresAt.getTime()).toBeGreaterThanOrEqual(Date.now() + 3_500_000);
  });

  it.each([[-1], [0], [Number.NaN], [Number.POSITIVE_INFINITY], [1e13], ['1000']])(
    'rejects extendLockTime(%p) exactly as a real context does, recording nothing',
    async (ms) => {
      const ctx = createTestJobContext();
      const expected = await rejectionOf(realContext().extendLockTime(ms as number));
      expect(expected.type).toBe('InvalidDurationError');
      expect(await rejectionOf(ctx.extendLockTime(ms as number))).toEqual(expected);
      expect(ctx.extendLockTimeCalls).toEqual([]);
    },
  );

  it.each([[Number.NaN], [101], [-1], [[1, 2]], [null], ['50'], [{ $set: 1 }], [{ big: 'x'.repeat(5_000) }]])(
    'rejects updateProgress(%p) exactly as a real context does, recording nothing',
    async (value) => {
      const ctx = createTestJobContext();
      const expected = await rejectionOf(realContext().updateProgress(value as never));
      expect(expected.type).toBe('InvalidProgressError');
      expect(await rejectionOf(ctx.updateProgress(value as never))).toEqual(expected);
      expect(ctx.progressUpdates).toEqual([]);
    },
  );

  it('records log lines as a worker stores them, refuses a non-string as the real context does, and drops lines once stale', () => {
    const ctx = createTestJobContext({ attempt: 2 });
    ctx.log('starting');
    ctx.log('€'.repeat(1_000));
    expect(ctx.logs.map((line) => [line.attempt, line.message.slice(0, 8)])).toEqual([
      [2, 'starting'],
      [2, '€€€€€€€€'],
    ]);
    expect(ctx.logs[0].at).toBeInstanceOf(Date);
    expect(Buffer.byteLength(ctx.logs[1].message)).toBeLessThanOrEqual(MAX_LOG_LINE_BYTES);
    const refusal = (context: JobExecutionContext) => {
      try {
        context.log(42 as unknown as string);
      } catch (error) {
        return { type: (error as Error).constructor.name, message: (error as Error).message };
      }
    };
    expect(refusal(ctx)).toEqual(refusal(realContext()));
    expect(refusal(ctx)?.type).toBe('InvalidOptionError');
    ctx.abort();
    ctx.log('after the cancel');
    expect(ctx.logs).toHaveLength(2);
  });

  it('aborts its signal on demand with the reason given (a cancellation by default)', () => {
    const ctx = createTestJobContext();
    const seen: unknown[] = [];
    ctx.signal.addEventListener('abort', () => seen.push(ctx.signal.reason));
    ctx.abort();
    expect(ctx.signal.aborted).toBe(true);
    expect(ctx.signal.reason).toBeInstanceOf(JobCancelledError);
    expect(seen).toEqual([ctx.signal.reason]);
    expect(() => ctx.signal.throwIfAborted()).toThrow(JobCancelledError);
    ctx.abort(new Error('second reason')); // the first reason wins, as in a real execution
    expect(ctx.signal.reason).toBeInstanceOf(JobCancelledError);
  });

  it('goes stale when aborted with LeaseLostError: later renewals and progress reject with it, as a real lease', async () => {
    const ctx = createTestJobContext();
    const lost = new LeaseLostError(ctx.jobId, ctx.lockId, 'taken-over');
    ctx.abort(lost);
    expect(ctx.isStale).toBe(true);
    await expect(ctx.extendLockTime(1_000)).rejects.toBe(lost);
    await expect(ctx.updateProgress(50)).rejects.toBe(lost);
    expect(ctx.extendLockTimeCalls).toEqual([]);
    expect(ctx.progressUpdates).toEqual([]);
  });

  it('keeps renewing after an abort that is neither a lost lease nor a cancel (the real lease does too)', async () => {
    const ctx = createTestJobContext();
    ctx.abort(new JobTimeoutError(ctx.jobId, 1_000));
    await ctx.extendLockTime(5_000);
    expect(ctx.isStale).toBe(false);
    expect(ctx.extendLockTimeCalls).toEqual([5_000]);
  });

  it('after ctx.abort() (a cancel), extendLockTime and updateProgress reject with the abort reason, as a real one', async () => {
    const ctx = createTestJobContext();
    ctx.abort();
    const reason = ctx.signal.reason;
    expect(reason).toBeInstanceOf(JobCancelledError);
    await expect(ctx.extendLockTime(1_000)).rejects.toBe(reason);
    await expect(ctx.updateProgress(50)).rejects.toBe(reason);
    expect(ctx.isStale).toBe(true);
    expect(ctx.extendLockTimeCalls).toEqual([]);
    expect(ctx.progressUpdates).toEqual([]);
  });

  it('a cancel after a timeout abort still ends the lease, while the signal keeps its first reason', async () => {
    const ctx = createTestJobContext();
    ctx.abort(new JobTimeoutError(ctx.jobId, 1_000));
    const cancel = new JobCancelledError(ctx.jobId);
    ctx.abort(cancel);
    expect(ctx.signal.reason).toBeInstanceOf(JobTimeoutError);
    await expect(ctx.extendLockTime(1_000)).rejects.toBe(cancel);
    expect(ctx.isStale).toBe(true);
  });

  it('lets a handler fire and forget a refused call, as the real context does (no unhandled rejection)', async () => {
    const unhandled: unknown[] = [];
    const record = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', record);
    try {
      for (const ctx of [realContext(), createTestJobContext()]) {
        void ctx.updateProgress(Number.NaN);
        void ctx.extendLockTime(-1);
      }
      const ctx = createTestJobContext();
      ctx.abort(new LeaseLostError(ctx.jobId, ctx.lockId, 'expired'));
      void ctx.updateProgress(50);
      void ctx.extendLockTime(1_000);
      // Node reports an unhandled rejection after the microtask queue drains: two macrotasks are enough.
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('unhandledRejection', record);
    }
    expect(unhandled.map((reason) => (reason as Error).constructor.name)).toEqual([]);
  });

  it('refuses a 9 MB progress string as the real context does, quickly and without recording it', async () => {
    const ctx = createTestJobContext();
    const huge = { note: 'x'.repeat(9 * 1024 * 1024) };
    const expected = await rejectionOf(realContext().updateProgress(huge));
    expect(await rejectionOf(ctx.updateProgress(huge))).toEqual(expected);
    expect(expected.type).toBe('InvalidProgressError');
    expect(ctx.progressUpdates).toEqual([]);
  });

  it('drives a handler the way a worker would', async () => {
    async function handler(payload: { chunks: number }, ctx: JobExecutionContext): Promise<number> {
      let done = 0;
      for (let i = 0; i < payload.chunks; i += 1) {
        ctx.signal.throwIfAborted();
        done += 1;
        await ctx.updateProgress({ done, total: payload.chunks });
      }
      return done;
    }
    const ctx = createTestJobContext({ name: 'chunks' });
    await expect(handler({ chunks: 2 }, ctx)).resolves.toBe(2);
    expect(ctx.progressUpdates).toEqual([
      { done: 1, total: 2 },
      { done: 2, total: 2 },
    ]);
    ctx.abort();
    await expect(handler({ chunks: 2 }, ctx)).rejects.toBeInstanceOf(JobCancelledError);
  });
});
