import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { type MongoClient, ObjectId } from 'mongodb';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { JobRunner } from '../../lib/worker/job-runner.service';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { connectTestClient, uniqueDatabaseName } from '../support/test-database';

const ran: string[] = [];
let corruptWhileRunning: ((jobId: string) => Promise<void>) | undefined;

@Injectable()
class PoisonHandlers {
  @JobHandler('poison.ok')
  ok(_payload: unknown, ctx: JobExecutionContext) {
    ran.push(ctx.jobId);
  }

  @JobHandler('poison.corrupted-mid-run', { maxAttempts: 5 })
  async corrupted(_payload: unknown, ctx: JobExecutionContext) {
    ran.push(ctx.jobId);
    await corruptWhileRunning?.(ctx.jobId);
    throw new Error('failed after its row was corrupted');
  }
}

/** A row as the library writes it, with `overrides` applied (inserted with the raw driver). */
function row(overrides: Record<string, unknown>) {
  const at = new Date(Date.now() - 1_000);
  return {
    name: 'poison.ok',
    payload: null,
    status: 'pending',
    runAt: at,
    priority: 0,
    attemptCount: 0,
    maxAttempts: 3,
    attempts: [],
    fencingToken: 0,
    createdAt: at,
    updatedAt: at,
    ...overrides,
  };
}

describe('rows a worker cannot run', () => {
  let app: JobsTestApp;
  let client: MongoClient;
  const dbName = uniqueDatabaseName('poison');
  const jobs = () => client.db(dbName).collection('jobs');

  beforeAll(async () => {
    client = await connectTestClient();
    app = await createJobsTestApp({ dbName, options: { pollIntervalMs: 20 }, providers: [PoisonHandlers] });
  });
  afterAll(async () => {
    await app.close();
    await client.db(dbName).dropDatabase();
    await client.close();
  });

  it('sets aside a row whose _id is not an ObjectId, or whose fields are malformed, and keeps running the rest', async () => {
    // Higher priority: the poison rows are claimed before the good job.
    await jobs().insertOne(row({ _id: 'not-an-object-id', priority: 5 }) as never);
    await jobs().insertOne(row({ _id: 42, priority: 5 }) as never);
    const malformed = new ObjectId();
    await jobs().insertOne(row({ _id: malformed, attemptCount: 'x', priority: 5 }) as never);
    const good = await app.jobs.enqueue('poison.ok');
    await waitFor(() => ran.includes(good.id), 'the good job to run');
    for (const id of ['not-an-object-id', 42, malformed] as const) {
      const doc = await jobs().findOne({ _id: id as never });
      expect(doc).toMatchObject({ status: 'failed' });
      expect(String(doc?.lastError)).toMatch(/cannot run|malformed|not an ObjectId/i);
    }
    expect(app.get(JobRunner).pollState().polling).toBe(true);
  });

  it('sets aside a row whose logs or logCount would make every write carrying ctx.log lines fail', async () => {
    const badLogs = new ObjectId();
    const badCount = new ObjectId();
    await jobs().insertOne(row({ _id: badLogs, logs: 'not an array', priority: 5 }) as never);
    await jobs().insertOne(row({ _id: badCount, logs: [], logCount: 'x', priority: 5 }) as never);
    const good = await app.jobs.enqueue('poison.ok');
    await waitFor(() => ran.includes(good.id), 'the good job to run');
    expect(await jobs().findOne({ _id: badLogs })).toMatchObject({
      status: 'failed',
      lastError: /logs .* not an array/,
    });
    expect(await jobs().findOne({ _id: badCount })).toMatchObject({ status: 'failed', lastError: /logCount/ });
    expect(ran).not.toContain(badLogs.toHexString());
    // Read back without a crash: the malformed field shows as no lines.
    expect(await app.jobs.findById(badLogs.toHexString())).toMatchObject({ logs: [], logsTruncated: false });
  });

  it('dead-letters an attempt whose outcome the server rejects for good, instead of retrying it until the lease ends', async () => {
    corruptWhileRunning = async (jobId) => {
      // Someone breaks the row while the handler runs: the failure write's $inc is now refused by the server.
      await jobs().updateOne({ _id: new ObjectId(jobId) }, { $set: { attemptCount: 'broken' } });
    };
    const job = await app.jobs.enqueue('poison.corrupted-mid-run');
    await waitFor(async () => (await jobs().findOne({ _id: new ObjectId(job.id) }))?.status === 'dead', 'dead', 5_000);
    const doc = await jobs().findOne({ _id: new ObjectId(job.id) });
    expect(String(doc?.lastError)).toMatch(/could not be stored/i);
    expect(doc?.lockedBy).toBeUndefined();
    expect(ran.filter((id) => id === job.id)).toHaveLength(1);
    corruptWhileRunning = undefined;
  });
});
