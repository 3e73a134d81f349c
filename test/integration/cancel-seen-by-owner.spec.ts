import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { Injectable, Logger } from '@nestjs/common';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { sleep } from '../support/sleep';
import { uniqueDatabaseName } from '../support/test-database';

const LEASE_MS = 1_500;

/** What the cancelled handler saw: its signal's reason, and what its lease calls rejected with afterwards. */
interface Seen {
  lockId: string;
  reason?: unknown;
  extendLockTime?: unknown;
  updateProgress?: unknown;
  done: boolean;
}
const seen: Seen[] = [];

async function rejectionOf(call: () => Promise<void>): Promise<unknown> {
  try {
    await call();
    return 'resolved';
  } catch (error) {
    return error;
  }
}

@Injectable()
class CancelledHandlers {
  /**
   * Waits for its signal, then asks for more lease and writes progress (as a handler checkpointing its work would),
   * and stops with what the progress write rejected with.
   */
  @JobHandler('checkpointing')
  async run(_payload: unknown, ctx: JobExecutionContext) {
    const entry: Seen = { lockId: ctx.lockId, done: false };
    seen.push(entry);
    try {
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
      entry.reason = ctx.signal.reason;
      entry.extendLockTime = await rejectionOf(() => ctx.extendLockTime(1_000));
      entry.updateProgress = await rejectionOf(() => ctx.updateProgress(50));
      throw entry.updateProgress;
    } finally {
      entry.done = true;
    }
  }

  /** Checkpoints every 20 ms until a checkpoint is refused: it learns of a cancel elsewhere from that refusal. */
  @JobHandler('checkpointing.busily')
  async busy(_payload: unknown, ctx: JobExecutionContext) {
    const entry: Seen = { lockId: ctx.lockId, done: false };
    seen.push(entry);
    try {
      for (let done = 0; ; done += 1) {
        const refused = await rejectionOf(() => ctx.updateProgress({ done }));
        if (refused !== 'resolved') {
          entry.updateProgress = refused;
          break;
        }
        await sleep(20);
      }
      entry.reason = ctx.signal.reason;
      entry.extendLockTime = await rejectionOf(() => ctx.extendLockTime(1_000));
      throw entry.updateProgress;
    } finally {
      entry.done = true;
    }
  }
}

/** Every line the library logged (through Nest's Logger) about `jobId`. */
function linesAbout(jobId: string, spies: ReturnType<typeof spyOnLogger>): string[] {
  return spies.flatMap((spy) => spy.mock.calls.map((call) => String(call[0]))).filter((line) => line.includes(jobId));
}

function spyOnLogger() {
  return [
    jest.spyOn(Logger.prototype, 'log'),
    jest.spyOn(Logger.prototype, 'warn'),
    jest.spyOn(Logger.prototype, 'error'),
  ];
}

/** A cancel reads as a cancel: to the handler (its signal and its lease calls), and in the log. */
describe('the owner of a cancelled run sees a cancel, not a lost lease', () => {
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    jest.restoreAllMocks();
    await Promise.all(apps.splice(0).map((app) => app.close()));
    seen.length = 0;
  });

  const start = async (dbName: string, workerId: string) => {
    const app = await createJobsTestApp({
      dbName,
      options: { leaseMs: LEASE_MS, pollIntervalMs: 20, workerId },
      providers: [CancelledHandlers],
    });
    apps.push(app);
    return app;
  };

  /** The handler got JobCancelledError from its signal and both lease calls; the log says "cancelled" once. */
  function expectACancel(entry: Seen, lines: string[]) {
    expect(entry.reason).toMatchObject({ name: 'JobCancelledError' });
    expect(entry.extendLockTime).toMatchObject({ name: 'JobCancelledError' });
    expect(entry.updateProgress).toMatchObject({ name: 'JobCancelledError' });
    expect(lines.filter((line) => /cancelled/.test(line))).toHaveLength(1);
    expect(lines.filter((line) => /owned by another worker|retry at|reclaimed|LeaseLostError/.test(line))).toEqual([]);
  }

  it('cancelled in its own process: the signal, extendLockTime and updateProgress all say JobCancelledError', async () => {
    const app = await start(uniqueDatabaseName('cancel_seen_local'), 'A');
    const spies = spyOnLogger();
    const job = await app.jobs.enqueue('checkpointing', null);
    await waitFor(() => seen.length === 1, 'the run to start');
    await app.jobs.cancel(job.id);
    await waitFor(() => seen[0].done, 'the handler to stop');
    await app.jobs.drain({ timeoutMs: 5_000 });
    expectACancel(seen[0], linesAbout(job.id, spies));
    expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'cancelled', attemptCount: 0 });
  });

  it('cancelled elsewhere: the owner learns it at its next renewal and reports it as a cancel', async () => {
    const dbName = uniqueDatabaseName('cancel_seen_remote');
    const owner = await start(dbName, 'A');
    const other = await createJobsTestApp({ dbName, options: { leaseMs: LEASE_MS, worker: false } });
    apps.push(other);
    const spies = spyOnLogger();
    const job = await owner.jobs.enqueue('checkpointing', null);
    await waitFor(() => seen.length === 1, 'the run to start');
    spies.forEach((spy) => {
      spy.mockClear();
    });
    await other.jobs.cancel(job.id);
    await waitFor(() => seen[0].done, 'the handler to stop');
    await owner.jobs.drain({ timeoutMs: 5_000 });
    expectACancel(seen[0], linesAbout(job.id, spies));
    expect(await owner.jobs.findById(job.id)).toMatchObject({ status: 'cancelled', attemptCount: 0 });
  });

  it('cancelled elsewhere: a progress write refused by the cancel rejects with JobCancelledError', async () => {
    const dbName = uniqueDatabaseName('cancel_seen_progress');
    const owner = await start(dbName, 'A');
    const other = await createJobsTestApp({ dbName, options: { leaseMs: LEASE_MS, worker: false } });
    apps.push(other);
    const spies = spyOnLogger();
    const job = await owner.jobs.enqueue('checkpointing.busily', null);
    await waitFor(async () => (await owner.jobs.findById(job.id))?.progress !== null, 'a checkpoint to be written');
    spies.forEach((spy) => {
      spy.mockClear();
    });
    await other.jobs.cancel(job.id);
    await waitFor(() => seen[0].done, 'the handler to stop');
    await owner.jobs.drain({ timeoutMs: 5_000 });
    expectACancel(seen[0], linesAbout(job.id, spies));
  });
});
