import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { Types } from 'mongoose';
import { JobExecution } from '../../../lib/execution/job-execution';
import { JobFinalizer } from '../../../lib/execution/job-finalizer.service';
import type { JobRetention } from '../../../lib/handlers/job-retention.service';
import type { RegisteredJobHandler } from '../../../lib/handlers/registered-job-handler';
import { Lease } from '../../../lib/lease/lease';
import { JobCancelledError } from '../../../lib/model/errors/job-cancelled.error';
import { JobEvents } from '../../../lib/model/events/job-events';
import type { JobDocument } from '../../../lib/model/job-document';
import { ShutdownDeadline } from '../../../lib/model/shutdown-deadline';
import type { JobOutcomeStore } from '../../../lib/persistence/job-outcome.store';
import { deferred } from '../../support/jobs-app';

const LEASE_MS = 30_000;

/** An execution whose lease renews at once, and a finalizer whose completion write waits for the test. */
function setup() {
  const doc = {
    _id: new Types.ObjectId(),
    name: 'finalize.unit',
    payload: null,
    status: 'running',
    attemptCount: 0,
    maxAttempts: 3,
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
  const execution = new JobExecution({ doc, lockId: 'lock-1' }, handler, doc._id.toHexString(), lease);
  const write = deferred<boolean>();
  const writeSent = deferred();
  const outcomes = {
    complete: () => {
      writeSent.resolve();
      return write.promise;
    },
  } as unknown as JobOutcomeStore;
  const retention = { expiresAt: () => undefined } as unknown as JobRetention;
  const finalizer = new JobFinalizer(
    outcomes,
    new JobEvents(),
    retention,
    new ShutdownDeadline({ shutdownGraceMs: 1_000 }),
  );
  return { execution, finalizer, write, writeSent };
}

describe('a cancel while the outcome is being written', () => {
  afterEach(() => {
    jest.restoreAllMocks();
  });

  it.each([
    ['the write answers first', false],
    ['the lease ends first', true],
  ])('logs once that the attempt was cancelled, nothing about lost leases or reclaims (%s)', async (_, leaseFirst) => {
    const lines: string[] = [];
    for (const level of ['log', 'warn', 'error'] as const) {
      jest.spyOn(Logger.prototype, level).mockImplementation((message: unknown) => {
        lines.push(String(message));
      });
    }
    const { execution, finalizer, write, writeSent } = setup();
    const finalized = finalizer.finalize(execution, { kind: 'succeeded', result: 1 });
    await writeSent.promise;
    // The cancel lands first: the completion write then matches nothing.
    execution.cancel(new JobCancelledError(execution.jobId));
    if (leaseFirst) await new Promise((resolve) => setImmediate(resolve));
    write.resolve(false);
    await finalized;
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.filter((line) => /was cancelled/.test(line))).toHaveLength(1);
    expect(lines.filter((line) => /lease was lost|reclaimed|no longer owns|taken over/.test(line))).toEqual([]);
  });
});
