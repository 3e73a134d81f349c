import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { Types } from 'mongoose';
import { JobExecution } from '../../../lib/execution/job-execution';
import type { RegisteredJobHandler } from '../../../lib/handlers/registered-job-handler';
import { Lease } from '../../../lib/lease/lease';
import { JobCancelledError } from '../../../lib/model/errors/job-cancelled.error';
import type { ExecutionOutcome } from '../../../lib/model/execution-outcome';
import type { JobDocument } from '../../../lib/model/job-document';

const T0 = 1_000_000;
/** The module's lease, which the claim writes; the handler's own lease is three times it. */
const CLAIM_MS = 300;
const HANDLER_LEASE_MS = 900;

/**
 * An execution of a handler with a longer lease than the module's, claimed at T0 for the module's lease, whose
 * renewals land at once. `handler` decides what the handler does.
 */
function execution(handler: (ctx: JobExecution['context']) => Promise<unknown>) {
  const doc = {
    _id: new Types.ObjectId(),
    name: 'cancel.unit',
    payload: null,
    status: 'running',
    attemptCount: 0,
    maxAttempts: 3,
    fencingToken: 1,
  } as unknown as JobDocument;
  const lease = new Lease({
    jobId: doc._id.toHexString(),
    lockId: 'lock-1',
    lockedUntil: new Date(T0 + CLAIM_MS),
    claimedAt: new Date(T0),
    heartbeatIntervalMs: HANDLER_LEASE_MS / 3,
    leaseMs: HANDLER_LEASE_MS,
    renew: async (requestedUntil) => requestedUntil,
    onStale: () => undefined,
  });
  const registered = {
    name: doc.name,
    handler: (_payload: unknown, ctx: JobExecution['context']) => handler(ctx),
    leaseMs: HANDLER_LEASE_MS,
  } as unknown as RegisteredJobHandler;
  return new JobExecution({ doc, lockId: 'lock-1' }, registered, doc._id.toHexString(), lease);
}

/** Runs `execution`, recording when the handler was reported as ignoring its signal and how the attempt ended. */
function run(job: JobExecution) {
  const seen: { ignoredAt?: number; outcome?: ExecutionOutcome } = {};
  void job.run({ onIgnoredAbort: () => (seen.ignoredAt = Date.now()) }).then((outcome) => {
    seen.outcome = outcome;
  });
  return seen;
}

const never = () => new Promise<never>(() => undefined);

describe('a cancelled execution', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: T0 });
  });
  afterEach(() => {
    jest.clearAllTimers();
    jest.useRealTimers();
  });

  it('before its first renewal: settles within the claim’s lease (what its row records), not its own', async () => {
    const job = execution(never);
    const seen = run(job);
    await jest.advanceTimersByTimeAsync(10);
    job.cancel(new JobCancelledError(job.jobId));
    await jest.advanceTimersByTimeAsync(CLAIM_MS - 1);
    expect(seen.ignoredAt).toBeUndefined();
    await jest.advanceTimersByTimeAsync(1);
    expect(seen.ignoredAt).toBe(T0 + 10 + CLAIM_MS);
    expect(seen.outcome?.kind).toBe('abandoned');
  });

  it('after its first renewal landed: settles within its own lease', async () => {
    const job = execution(never);
    const seen = run(job);
    await jest.advanceTimersByTimeAsync(150); // the first beat (a third of the claim's lease) has renewed
    expect(job.lease.recordedLeaseMs).toBe(HANDLER_LEASE_MS);
    job.cancel(new JobCancelledError(job.jobId));
    await jest.advanceTimersByTimeAsync(HANDLER_LEASE_MS - 1);
    expect(seen.ignoredAt).toBeUndefined();
    await jest.advanceTimersByTimeAsync(1);
    expect(seen.ignoredAt).toBe(T0 + 150 + HANDLER_LEASE_MS);
  });

  it('ends as cancelled whatever the handler does once it has seen the cancel; its lease calls reject with it', async () => {
    for (const settle of ['resolves', 'throws its own error'] as const) {
      const refusals: unknown[] = [];
      const job = execution(async (ctx) => {
        await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
        refusals.push(await ctx.extendLockTime(1_000).catch((error: unknown) => error));
        refusals.push(await ctx.updateProgress(10).catch((error: unknown) => error));
        if (settle === 'throws its own error') throw new Error('cleanup failed');
        return 'done anyway';
      });
      const seen = run(job);
      await jest.advanceTimersByTimeAsync(10);
      const reason = new JobCancelledError(job.jobId);
      job.cancel(reason);
      await jest.advanceTimersByTimeAsync(1);
      expect(refusals).toEqual([reason, reason]);
      expect(job.context.isStale).toBe(true);
      expect(seen.outcome).toEqual({ kind: 'cancelled' });
    }
  });
});
