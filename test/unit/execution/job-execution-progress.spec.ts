import { afterEach, describe, expect, it } from '@jest/globals';
import { Types } from 'mongoose';
import { JobExecution } from '../../../lib/execution/job-execution';
import type { RegisteredJobHandler } from '../../../lib/handlers/registered-job-handler';
import { Lease } from '../../../lib/lease/lease';
import { InvalidDurationError } from '../../../lib/model/errors/invalid-duration.error';
import { InvalidProgressError } from '../../../lib/model/errors/invalid-progress.error';
import type { JobDocument } from '../../../lib/model/job-document';
import { sleep } from '../../support/sleep';

const LEASE_MS = 30_000;

function execution(): JobExecution {
  const at = new Date();
  const doc = {
    _id: new Types.ObjectId(),
    name: 'progress.unit',
    payload: null,
    status: 'running',
    attemptCount: 0,
    maxAttempts: 1,
    fencingToken: 1,
  } as unknown as JobDocument;
  const lease = new Lease({
    jobId: doc._id.toHexString(),
    lockId: 'lock-1',
    lockedUntil: new Date(at.getTime() + LEASE_MS),
    heartbeatIntervalMs: LEASE_MS / 3,
    leaseMs: LEASE_MS,
    renew: async (requestedUntil) => requestedUntil,
    onStale: () => undefined,
  });
  const handler = { name: doc.name, handler: () => undefined, leaseMs: LEASE_MS } as unknown as RegisteredJobHandler;
  return new JobExecution({ doc, lockId: 'lock-1' }, handler, doc._id.toHexString(), lease);
}

/** Rejections nobody handled, as Node reports them (by default it then ends the process). */
const unhandled: unknown[] = [];
const record = (reason: unknown) => unhandled.push(reason);

describe('ctx.updateProgress called without awaiting (fire and forget)', () => {
  afterEach(() => {
    process.off('unhandledRejection', record);
    unhandled.length = 0;
  });

  it('rejects an invalid value for a caller who awaits, but leaves no unhandled rejection (as extendLockTime)', async () => {
    process.on('unhandledRejection', record);
    const { context } = execution();
    void context.extendLockTime(-1);
    void context.updateProgress(Number.NaN);
    void context.updateProgress(101);
    await sleep(10); // Node reports unhandled rejections after a tick
    expect(unhandled).toEqual([]);
    await expect(context.updateProgress(Number.NaN)).rejects.toBeInstanceOf(InvalidProgressError);
    await expect(context.extendLockTime(-1)).rejects.toBeInstanceOf(InvalidDurationError);
  });
});
