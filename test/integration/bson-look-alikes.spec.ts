import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import * as topLevelBson from 'bson';
import * as topLevelDriver from 'mongodb';
import { Types } from 'mongoose';
import { InvalidPayloadError, InvalidProgressError, type JobExecutionContext, JobHandler } from '../../lib';
import { createJobsTestApp, type JobsTestApp } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

/** An upstream API's answer passed through as it came: plain objects, one of them tagged like a BSON ObjectId. */
const upstreamAnswer = () => ({
  items: [{ name: 'first' }, { owner: { _bsontype: 'ObjectId', id: '5f1d7a0e2c3b4a5d6e7f8091' } }],
});

/** Handler calls per job id. */
const calls = new Map<string, number>();
/** What each handler's `updateProgress` settled with, by job id. */
const progressOutcomes = new Map<string, unknown>();

/** Real BSON values from each copy of the library an application may import, and a date. */
const realValues = () => ({
  mongooseId: new Types.ObjectId('5f1d7a0e2c3b4a5d6e7f8091'),
  driverId: new topLevelDriver.ObjectId('5f1d7a0e2c3b4a5d6e7f8092'),
  bsonId: new topLevelBson.ObjectId('5f1d7a0e2c3b4a5d6e7f8093'),
  at: new Date('2026-01-02T03:04:05.000Z'),
  nested: [{ id: new topLevelBson.ObjectId('5f1d7a0e2c3b4a5d6e7f8094') }],
});

@Injectable()
class Handlers {
  @JobHandler('passes.through', { maxAttempts: 3, backoff: { baseMs: 1, maxMs: 1 } })
  passThrough(_payload: unknown, ctx: JobExecutionContext) {
    calls.set(ctx.jobId, (calls.get(ctx.jobId) ?? 0) + 1);
    return { answer: upstreamAnswer() };
  }

  @JobHandler('reports.progress')
  async reportProgress(_payload: unknown, ctx: JobExecutionContext) {
    const outcome = await ctx.updateProgress({ stage: { answer: upstreamAnswer() } }).then(
      () => 'resolved',
      (error: unknown) => error,
    );
    progressOutcomes.set(ctx.jobId, outcome);
  }

  @JobHandler('real.values')
  async realValues(payload: unknown, ctx: JobExecutionContext) {
    await ctx.updateProgress({ values: realValues() });
    return payload;
  }
}

describe('BSON look-alikes: refused before anything is written, real BSON values still stored', () => {
  let app: JobsTestApp;

  beforeAll(async () => {
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('bson-look-alikes'),
      options: { pollIntervalMs: 20 },
      providers: [Handlers],
    });
  });
  afterAll(() => app?.close());

  it('dead-letters a result holding a look-alike at once, with UnstorableResultError: the handler ran exactly once', async () => {
    const job = await app.jobs.enqueue('passes.through');
    const finished = await app.jobs.waitUntilFinished(job.id, { timeoutMs: 10_000 });
    expect(calls.get(job.id)).toBe(1);
    expect(finished).toMatchObject({ status: 'dead', attemptCount: 1, result: null });
    expect(finished.attempts.map((attempt) => attempt.errorClass)).toEqual(['UnstorableResultError']);
    expect(finished.lastError).toContain('result.answer.items.1.owner has a "_bsontype" key');
  });

  it('rejects a look-alike progress with InvalidProgressError in the real context, writing nothing', async () => {
    const job = await app.jobs.enqueue('reports.progress');
    const finished = await app.jobs.waitUntilFinished(job.id, { timeoutMs: 10_000 });
    const outcome = progressOutcomes.get(job.id);
    expect(outcome).toBeInstanceOf(InvalidProgressError);
    expect((outcome as Error).message).toContain('progress.stage.answer.items.1.owner has a "_bsontype" key');
    expect(finished).toMatchObject({ status: 'completed', progress: null });
  });

  it('refuses a payload holding a look-alike with InvalidPayloadError, storing nothing', async () => {
    const before = await app.connection.collection('jobs').countDocuments();
    await expect(app.jobs.enqueue('real.values', { answer: upstreamAnswer() })).rejects.toThrow(InvalidPayloadError);
    await expect(app.jobs.enqueue('real.values', { answer: upstreamAnswer() })).rejects.toThrow(
      'payload.answer.items.1.owner has a "_bsontype" key',
    );
    await expect(
      app.jobs.enqueueMany([{ name: 'real.values', payload: { deep: [[upstreamAnswer()]] } }]),
    ).rejects.toThrow(InvalidPayloadError);
    expect(await app.connection.collection('jobs').countDocuments()).toBe(before);
  });

  it('stores real ObjectIds of every bson copy and dates as payload, progress and result, read back as stored', async () => {
    const job = await app.jobs.enqueue('real.values', realValues());
    const finished = await app.jobs.waitUntilFinished(job.id, { timeoutMs: 10_000 });
    expect(finished.status).toBe('completed');
    const expected = {
      mongooseId: new Types.ObjectId('5f1d7a0e2c3b4a5d6e7f8091'),
      driverId: new Types.ObjectId('5f1d7a0e2c3b4a5d6e7f8092'),
      bsonId: new Types.ObjectId('5f1d7a0e2c3b4a5d6e7f8093'),
      at: new Date('2026-01-02T03:04:05.000Z'),
      nested: [{ id: new Types.ObjectId('5f1d7a0e2c3b4a5d6e7f8094') }],
    };
    expect(finished.payload).toEqual(expected);
    expect(finished.result).toEqual(expected);
    expect(finished.progress).toEqual({ values: expected });
  });
});
