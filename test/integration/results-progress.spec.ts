import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Types } from 'mongoose';
import {
  InvalidJobIdError,
  InvalidProgressError,
  type JobEvent,
  type JobExecutionContext,
  JobHandler,
  JobNotFoundError,
  LeaseLostError,
  UnrecoverableJobError,
  UnstorableResultError,
  WaitTimeoutError,
} from '../../lib';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

const MB = 1024 * 1024;
/** Gates the blocking handlers wait on, by job id. */
const gates = new Map<string, { promise: Promise<void>; resolve: () => void }>();
const gate = (jobId: string) => {
  let entry = gates.get(jobId);
  if (!entry) {
    entry = deferred();
    gates.set(jobId, entry);
  }
  return entry;
};
/** What a progress call made by a handler settled with, by job id. */
const progressOutcomes = new Map<string, unknown>();

@Injectable()
class ResultHandlers {
  @JobHandler('result.echo')
  echo(payload: { value: unknown }) {
    return payload.value;
  }

  @JobHandler('result.none')
  none() {}

  @JobHandler('result.unstorable', { maxAttempts: 3 })
  unstorable(payload: { kind: string }) {
    switch (payload.kind) {
      case 'function':
        return { summary: 'ok', format: () => 'text' };
      case 'map':
        return { counts: new Map([['a', 1]]) };
      case 'over 16 MB':
        return 'x'.repeat(16 * MB + 1);
      default:
        // Fits on its own, but not in one document with this job's 1.5 MB payload.
        return 'x'.repeat(15 * MB);
    }
  }

  @JobHandler('result.dead')
  dead() {
    throw new UnrecoverableJobError('bad input');
  }

  @JobHandler('blocked')
  async blocked(_payload: unknown, ctx: JobExecutionContext) {
    await gate(ctx.jobId).promise;
    return 'released';
  }

  @JobHandler('progress.steps')
  async steps(_payload: unknown, ctx: JobExecutionContext) {
    await ctx.updateProgress(25);
    await ctx.updateProgress({ stage: 'upload', done: 3, total: 4 });
    await gate(ctx.jobId).promise;
    return 'done';
  }

  @JobHandler('progress.last')
  last(_payload: unknown, ctx: JobExecutionContext) {
    // Not awaited: the last value set before the handler returns must still reach the completed row.
    for (let i = 1; i <= 50; i += 1) void ctx.updateProgress(i * 2);
    return 'done';
  }

  @JobHandler('progress.retried', { backoff: { baseMs: 1, maxMs: 1 } })
  async retried(_payload: unknown, ctx: JobExecutionContext) {
    if (ctx.attempt > 1) return 'second attempt sets no progress';
    await ctx.updateProgress({ stage: 'first attempt' });
    throw new Error('first attempt fails');
  }

  @JobHandler('progress.mutated')
  mutated(_payload: unknown, ctx: JobExecutionContext) {
    const value: Record<string, unknown> = { stage: 'as passed' };
    void ctx.updateProgress(value);
    // Changing the object after passing it changes nothing stored: the value was taken when it was passed.
    Object.assign(value, { stage: 'changed later', big: 'x'.repeat(8_000) });
    return 'done';
  }

  @JobHandler('progress.invalid')
  async invalid(_payload: unknown, ctx: JobExecutionContext) {
    progressOutcomes.set(
      ctx.jobId,
      await ctx.updateProgress(Number.NaN).then(
        () => 'resolved',
        (error: unknown) => error,
      ),
    );
  }

  @JobHandler('progress.stale', { leaseMs: 60_000 })
  async stale(_payload: unknown, ctx: JobExecutionContext) {
    await ctx.updateProgress(10);
    await gate(ctx.jobId).promise;
    progressOutcomes.set(
      ctx.jobId,
      await ctx.updateProgress(99).then(
        () => 'resolved',
        (error: unknown) => error,
      ),
    );
  }
}

describe('results, waiting and progress', () => {
  let app: JobsTestApp;
  let producer: JobsTestApp;
  const dbName = uniqueDatabaseName('results_progress');

  beforeAll(async () => {
    app = await createJobsTestApp({
      dbName,
      options: { pollIntervalMs: 50, concurrency: 4, workerId: 'runner' },
      providers: [ResultHandlers],
    });
    // Another process on the same database that runs nothing: it learns of outcomes only from the database.
    producer = await createJobsTestApp({
      dbName,
      options: { pollIntervalMs: 50, worker: false, workerId: 'producer' },
      providers: [ResultHandlers],
    });
  });
  afterAll(async () => {
    await producer?.close();
    await app?.close();
  });

  const raw = (id: string) => app.connection.collection('jobs').findOne({ _id: new Types.ObjectId(id) });

  describe('result', () => {
    it("stores the handler's resolved value as the job's result, read back as stored", async () => {
      const value = { total: 3, names: ['a', 'b'], at: new Date('2030-01-01T00:00:00Z'), bytes: Buffer.from([1, 2]) };
      const job = await app.jobs.enqueue('result.echo', { value });
      const finished = await app.jobs.waitUntilFinished(job.id, { timeoutMs: 10_000 });
      expect(finished).toMatchObject({ id: job.id, status: 'completed', result: value, progress: null });
      expect(Buffer.isBuffer((finished.result as typeof value).bytes)).toBe(true);
      expect((await app.jobs.findById(job.id))?.result).toEqual(value);
    });

    it('shows null as the result of a handler that returned nothing, and of a job not finished', async () => {
      const none = await app.jobs.enqueue('result.none', {});
      expect(none.result).toBeNull();
      const finished = await app.jobs.waitUntilFinished(none.id, { timeoutMs: 10_000 });
      expect(finished).toMatchObject({ status: 'completed', result: null });
      expect(await raw(none.id)).not.toHaveProperty('result');
    });

    it.each([
      ['function', 'result.format is a function'],
      ['map', 'result.counts is a Map instance'],
      ['over 16 MB', 'over the limit'],
      ['too big with the document', 'over the 16 MB document limit'],
    ])(
      'dead-letters a job whose result cannot be stored (%s) with UnstorableResultError, writing no result',
      async (kind, problem) => {
        const payload = { kind, padding: kind === 'too big with the document' ? 'p'.repeat(1.5 * MB) : '' };
        const job = await app.jobs.enqueue('result.unstorable', payload);
        const finished = await app.jobs.waitUntilFinished(job.id, { timeoutMs: 20_000 });
        expect(finished).toMatchObject({ status: 'dead', attemptCount: 1, result: null });
        expect(finished.attempts).toHaveLength(1);
        expect(finished.attempts[0].errorClass).toBe('UnstorableResultError');
        expect(finished.attempts[0].error).toContain(problem);
        expect(finished.lastError).toContain(problem);
        const row = await raw(job.id);
        expect(row).not.toHaveProperty('result');
        expect(row).not.toHaveProperty('lockedBy');
      },
    );

    it('UnstorableResultError is unrecoverable (dead-letters at once) and names the problem', () => {
      const error = new UnstorableResultError('job-1', 'format', 'is a function, which cannot be stored');
      expect(error).toBeInstanceOf(UnrecoverableJobError);
      expect(error.message).toBe(
        'Job job-1 returned a result that cannot be stored: result.format is a function, which cannot be stored',
      );
    });
  });

  describe('waitUntilFinished', () => {
    it('resolves with the final record of a job that runs in this process, whatever its final status', async () => {
      const events: JobEvent[] = [];
      const subscription = app.jobs.events$.subscribe((event) => events.push(event));
      const dead = await app.jobs.enqueue('result.dead', {});
      const blocked = await app.jobs.enqueue('blocked', {});
      const waiting = app.jobs.waitUntilFinished(blocked.id, { timeoutMs: 10_000 });
      await expect(app.jobs.waitUntilFinished(dead.id, { timeoutMs: 10_000 })).resolves.toMatchObject({
        status: 'dead',
        lastError: 'bad input',
      });
      await waitFor(() => events.some((e) => e.jobId === blocked.id && e.type === 'started'), 'the blocked job');
      gate(blocked.id).resolve();
      await expect(waiting).resolves.toMatchObject({ status: 'completed', result: 'released' });
      subscription.unsubscribe();
    });

    it('resolves a cancelled job', async () => {
      const blocked = await app.jobs.enqueue('blocked', {});
      const waiting = app.jobs.waitUntilFinished(blocked.id, { timeoutMs: 10_000 });
      await app.jobs.cancel(blocked.id);
      await expect(waiting).resolves.toMatchObject({ id: blocked.id, status: 'cancelled' });
      gate(blocked.id).resolve();
    });

    it('resolves in another process, which runs nothing and learns the outcome from the database', async () => {
      const job = await producer.jobs.enqueue('result.echo', { value: { answer: 42 } });
      const finished = await producer.jobs.waitUntilFinished(job.id, { timeoutMs: 10_000 });
      expect(finished).toMatchObject({ status: 'completed', result: { answer: 42 } });
    });

    it('resolves at once for a job already finished', async () => {
      const job = await app.jobs.enqueue('result.none', {});
      await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'completion');
      await expect(producer.jobs.waitUntilFinished(job.id, { timeoutMs: 10_000 })).resolves.toMatchObject({
        status: 'completed',
      });
    });

    it('rejects with WaitTimeoutError (not JobTimeoutError) when the job is not finished in time', async () => {
      const job = await app.jobs.enqueue('blocked', {});
      const waited = producer.jobs.waitUntilFinished(job.id, { timeoutMs: 200 });
      await expect(waited).rejects.toBeInstanceOf(WaitTimeoutError);
      await expect(waited).rejects.toThrow(`Job ${job.id} did not finish within 200 ms`);
      gate(job.id).resolve();
      await app.jobs.waitUntilFinished(job.id, { timeoutMs: 10_000 });
    });

    it('rejects at once for a malformed id, an unknown id, or an invalid timeout', async () => {
      await expect(app.jobs.waitUntilFinished('nope', { timeoutMs: 60_000 })).rejects.toBeInstanceOf(InvalidJobIdError);
      const unknown = new Types.ObjectId().toHexString();
      await expect(app.jobs.waitUntilFinished(unknown, { timeoutMs: 60_000 })).rejects.toBeInstanceOf(JobNotFoundError);
      await expect(app.jobs.waitUntilFinished(unknown, { timeoutMs: -1 })).rejects.toThrow('timeoutMs');
    });
  });

  describe('progress', () => {
    it('stores progress on the running row (findById from any process) and emits progress events', async () => {
      const events: JobEvent[] = [];
      const subscription = app.jobs.events$.subscribe((event) => events.push(event));
      const job = await app.jobs.enqueue('progress.steps', {});
      const latest = { stage: 'upload', done: 3, total: 4 };
      await waitFor(
        async () => JSON.stringify((await producer.jobs.findById(job.id))?.progress) === JSON.stringify(latest),
        'the latest progress on the row',
      );
      expect(await producer.jobs.findById(job.id)).toMatchObject({ status: 'running', progress: latest });
      const progress = events.filter((e) => e.jobId === job.id && e.type === 'progress');
      expect(progress.map((e) => e.progress)).toEqual([25, latest]);
      expect(progress[0]).toMatchObject({ name: 'progress.steps', attempt: 1 });
      gate(job.id).resolve();
      await expect(app.jobs.waitUntilFinished(job.id, { timeoutMs: 10_000 })).resolves.toMatchObject({
        status: 'completed',
        progress: latest,
      });
      subscription.unsubscribe();
    });

    it('has the value set last before the handler returned on the completed row', async () => {
      const job = await app.jobs.enqueue('progress.last', {});
      await expect(app.jobs.waitUntilFinished(job.id, { timeoutMs: 10_000 })).resolves.toMatchObject({
        status: 'completed',
        progress: 100,
      });
    });

    it("shows this attempt's progress only: a retried job that sets none completes without the earlier value", async () => {
      const job = await app.jobs.enqueue('progress.retried', {});
      await expect(app.jobs.waitUntilFinished(job.id, { timeoutMs: 10_000 })).resolves.toMatchObject({
        status: 'completed',
        attemptCount: 1,
        progress: null,
      });
    });

    it('stores the value as it was when passed, whatever the handler does to the object afterwards', async () => {
      const job = await app.jobs.enqueue('progress.mutated', {});
      await expect(app.jobs.waitUntilFinished(job.id, { timeoutMs: 10_000 })).resolves.toMatchObject({
        status: 'completed',
        progress: { stage: 'as passed' },
      });
      expect((await raw(job.id))?.progress).toEqual({ stage: 'as passed' });
    });

    it('rejects an invalid value with InvalidProgressError and writes nothing', async () => {
      const job = await app.jobs.enqueue('progress.invalid', {});
      const finished = await app.jobs.waitUntilFinished(job.id, { timeoutMs: 10_000 });
      expect(progressOutcomes.get(job.id)).toBeInstanceOf(InvalidProgressError);
      expect(finished).toMatchObject({ status: 'completed', progress: null });
    });

    it('changes nothing when written by an execution whose row was taken over, and rejects with LeaseLostError', async () => {
      const job = await app.jobs.enqueue('progress.stale', {});
      await waitFor(async () => (await raw(job.id))?.progress === 10, 'the first progress');
      // Another owner takes the row (as a reclaim would after this worker stalled).
      await app.connection
        .collection('jobs')
        .updateOne({ _id: new Types.ObjectId(job.id) }, { $set: { lockedBy: 'other#1' } });
      gate(job.id).resolve();
      await waitFor(() => progressOutcomes.has(job.id), 'the stale progress call to settle');
      expect(progressOutcomes.get(job.id)).toBeInstanceOf(LeaseLostError);
      expect(await raw(job.id)).toMatchObject({ status: 'running', lockedBy: 'other#1', progress: 10 });
    });
  });
});
