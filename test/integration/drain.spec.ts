import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Types } from 'mongoose';
import {
  DrainTimeoutError,
  InvalidDurationError,
  InvalidOptionError,
  type JobExecutionContext,
  JobHandler,
  JobsService,
  WaitTimeoutError,
} from '../../lib';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

/** Jobs of `drain.hang` wait on this until a test lets them go. */
let hang = deferred();
/** Attempts seen by `drain.flaky`, by job id. */
const flakyAttempts = new Map<string, number>();

@Injectable()
class DrainHandlers {
  constructor(private readonly jobs: JobsService) {}

  /** Fails its first attempt: the retry waits out a 50 ms backoff as a pending row. */
  @JobHandler('drain.flaky', { maxAttempts: 3, backoff: { baseMs: 50, maxMs: 50 } })
  flaky(_payload: unknown, ctx: JobExecutionContext): string {
    flakyAttempts.set(ctx.jobId, ctx.attempt);
    if (ctx.attempt === 1) throw new Error('first attempt fails');
    return 'ok';
  }

  /** Enqueues its follow-up right before returning: the child exists before the parent's row leaves `running`. */
  @JobHandler('drain.parent')
  async parent(payload: { depth: number }): Promise<void> {
    if (payload.depth > 0) await this.jobs.enqueue('drain.parent', { depth: payload.depth - 1 });
  }

  /** Enqueues its follow-up without awaiting it: the insert may land after the parent's row is completed. */
  @JobHandler('drain.fire-and-forget')
  fireAndForget(): void {
    void this.jobs.enqueue('drain.child', { from: 'fire-and-forget' });
  }

  @JobHandler('drain.child')
  child(): void {}

  @JobHandler('drain.hang')
  async hang(): Promise<void> {
    await hang.promise;
  }
}

describe('JobsService.drain', () => {
  const dbName = uniqueDatabaseName('drain');
  let app: JobsTestApp;
  let producer: JobsTestApp;

  beforeAll(async () => {
    app = await createJobsTestApp({ dbName, providers: [DrainHandlers] });
    // An enqueue-only process on the same collection: it runs nothing.
    producer = await createJobsTestApp({ dbName, options: { worker: false } });
  });

  afterAll(async () => {
    hang.resolve();
    await producer?.close();
    await app?.close();
  });

  const statusOf = async (id: string) => (await app.jobs.findById(id))?.status;

  it('waits for a retry that waits out a short backoff', async () => {
    const { id } = await app.jobs.enqueue('drain.flaky', {});
    await app.jobs.drain({ timeoutMs: 10_000 });
    const job = await app.jobs.findById(id);
    expect(job?.status).toBe('completed');
    expect(job?.attempts).toHaveLength(1); // the failed first attempt
    expect(flakyAttempts.get(id)).toBe(2);
  });

  it('waits for jobs that handlers enqueue while it drains, chain after chain', async () => {
    const { id } = await app.jobs.enqueue('drain.parent', { depth: 3 });
    await app.jobs.drain({ timeoutMs: 10_000 });
    const { jobs } = await app.jobs.list({ name: 'drain.parent', limit: 10 });
    expect(jobs.map((job) => job.status)).toEqual(['completed', 'completed', 'completed', 'completed']);
    expect(await statusOf(id)).toBe('completed');
  });

  it('waits for a follow-up a handler enqueues without awaiting it, however late its insert lands', async () => {
    // The child's insert is held back (in our enqueue store, not in mongoose) until the parent's row is completed and
    // the drain has read an empty queue twice: only the enqueue still in flight in this process says it is not.
    const release = deferred();
    const insert = app.stores.enqueue.insert.bind(app.stores.enqueue);
    const held = jest.spyOn(app.stores.enqueue, 'insert').mockImplementation(async (doc) => {
      if (doc.name === 'drain.child') await release.promise;
      return insert(doc);
    });
    const reads = jest.spyOn(app.stores.read, 'countUnfinished');
    try {
      const { id } = await app.jobs.enqueue('drain.fire-and-forget', {});
      let settled = false;
      const drained = app.jobs.drain({ timeoutMs: 10_000 }).finally(() => {
        settled = true;
      });
      await waitFor(async () => (await statusOf(id)) === 'completed', 'the parent to complete');
      const readsThen = reads.mock.calls.length;
      await waitFor(() => settled || reads.mock.calls.length >= readsThen + 2, 'two drain reads after the parent');
      expect(settled).toBe(false);
      release.resolve();
      await drained;
      expect((await app.jobs.list({ name: 'drain.child', status: ['pending', 'running'] })).jobs).toEqual([]);
      expect((await app.jobs.list({ name: 'drain.child', status: 'completed' })).jobs).toHaveLength(1);
    } finally {
      release.resolve();
      held.mockRestore();
      reads.mockRestore();
    }
  });

  it('does not wait for a job delayed past its deadline', async () => {
    const delayed = await app.jobs.enqueue('drain.child', {}, { delayMs: 3_600_000 });
    const due = await app.jobs.enqueue('drain.child', {});
    await app.jobs.drain({ timeoutMs: 10_000 });
    expect(await statusOf(due.id)).toBe('completed');
    expect(await statusOf(delayed.id)).toBe('pending');
    await app.jobs.cancel(delayed.id);
  });

  it('waits for a job delayed to within its deadline', async () => {
    const soon = await app.jobs.enqueue('drain.child', {}, { delayMs: 150 });
    await app.jobs.drain({ timeoutMs: 10_000 });
    expect(await statusOf(soon.id)).toBe('completed');
  });

  it('rejects with a WaitTimeoutError naming the stuck job, which it leaves alone', async () => {
    hang = deferred();
    const { id } = await app.jobs.enqueue('drain.hang', {});
    const error = await app.jobs.drain({ timeoutMs: 300 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WaitTimeoutError);
    expect(error).toBeInstanceOf(DrainTimeoutError);
    const drainError = error as DrainTimeoutError;
    expect(drainError.left).toEqual([{ name: 'drain.hang', status: 'running', count: 1, jobId: id }]);
    expect(drainError.timeoutMs).toBe(300);
    expect(drainError.message).toContain('drain.hang');
    expect(drainError.message).toContain('running');
    expect(drainError.message).toContain(id);
    expect(await statusOf(id)).toBe('running');
    hang.resolve();
    await app.jobs.drain({ timeoutMs: 10_000 });
    expect(await statusOf(id)).toBe('completed');
  });

  it('waits only for the names it is given', async () => {
    hang = deferred();
    const stuck = await app.jobs.enqueue('drain.hang', {});
    const child = await app.jobs.enqueue('drain.child', {});
    await app.jobs.drain({ names: ['drain.child'], timeoutMs: 10_000 });
    expect(await statusOf(child.id)).toBe('completed');
    expect(await statusOf(stuck.id)).toBe('running');
    hang.resolve();
    await app.jobs.drain({ names: ['drain.hang'], timeoutMs: 10_000 });
  });

  it('counts a name no process handles: its pending jobs are what is left', async () => {
    const { id } = await app.jobs.enqueue('drain.nobody', {}, { strict: false });
    const error = (await app.jobs
      .drain({ names: ['drain.nobody', 'drain.child'], timeoutMs: 200 })
      .catch((e: unknown) => e)) as DrainTimeoutError;
    expect(error).toBeInstanceOf(DrainTimeoutError);
    expect(error.left).toEqual([{ name: 'drain.nobody', status: 'pending', count: 1, jobId: id }]);
    await app.jobs.cancel(id);
  });

  /** Turns a delayed pending job into the row a crashed worker leaves: `running`, its lease run out long ago. */
  async function orphan(name: string): Promise<string> {
    const { id } = await app.jobs.enqueue(name, {}, { delayMs: 3_600_000, strict: false });
    const past = new Date(Date.now() - 60_000);
    await app.connection
      .collection('jobs')
      .updateOne(
        { _id: new Types.ObjectId(id) },
        { $set: { status: 'running', runAt: past, lockedBy: 'crashed#1', lockedUntil: past, fencingToken: 1 } },
      );
    return id;
  }

  it('waits for the reclaim of a job left running with an expired lease by a crashed worker', async () => {
    const id = await orphan('drain.child');
    await app.jobs.drain({ timeoutMs: 10_000 });
    expect(['completed', 'dead']).toContain(await statusOf(id));
  });

  it('names a job left running with an expired lease that nobody reclaims, and says its lease ran out', async () => {
    const id = await orphan('drain.orphan');
    const error = (await app.jobs
      .drain({ names: ['drain.orphan'], timeoutMs: 200 })
      .catch((e: unknown) => e)) as DrainTimeoutError;
    expect(error).toBeInstanceOf(DrainTimeoutError);
    expect(error.left).toEqual([{ name: 'drain.orphan', status: 'running', count: 1, jobId: id, expiredLeases: 1 }]);
    expect(error.message).toMatch(/lease/);
    await app.jobs.cancel(id);
  });

  describe('in an enqueue-only process (worker: false)', () => {
    it('requires names: it runs none itself', async () => {
      await expect(producer.jobs.drain({ timeoutMs: 1_000 })).rejects.toThrow(InvalidOptionError);
      await expect(producer.jobs.drain({ timeoutMs: 1_000 })).rejects.toThrow(/names/);
    });

    it('waits for the jobs it enqueued to be run by another process', async () => {
      const { id } = await producer.jobs.enqueue('drain.flaky', {}, { strict: false });
      await producer.jobs.drain({ names: ['drain.flaky'], timeoutMs: 10_000 });
      expect(await statusOf(id)).toBe('completed');
    });
  });

  it.each([
    [{ timeoutMs: -1 }, InvalidDurationError],
    [{ timeoutMs: Number.NaN }, InvalidDurationError],
    [{ timeoutMs: Number.POSITIVE_INFINITY }, InvalidDurationError],
    [{}, InvalidDurationError],
    [{ timeoutMs: 1_000, names: [] }, InvalidOptionError],
    [{ timeoutMs: 1_000, names: [''] }, InvalidOptionError],
    [{ timeoutMs: 1_000, names: 'drain.child' }, InvalidOptionError],
    [{ timeoutMs: 1_000, name: 'drain.child' }, InvalidOptionError],
  ])('refuses %p before reading anything', async (options, type) => {
    await expect(app.jobs.drain(options as never)).rejects.toBeInstanceOf(type);
  });
});
