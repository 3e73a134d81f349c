import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { Collection, Document, MongoClient } from 'mongodb';
import { JobHandler } from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { connectTestClient, uniqueDatabaseName } from '../support/test-database';

const ran: string[] = [];

@Injectable()
class TickHandlers {
  @JobHandler('tick')
  tick(payload: { label: string }) {
    ran.push(payload.label);
  }
}

describe('rows the server refuses to claim', () => {
  let app: JobsTestApp;
  let client: MongoClient;
  let raw: Collection<Document>;

  beforeAll(async () => {
    const dbName = uniqueDatabaseName('poison');
    app = await createJobsTestApp({ dbName, options: { pollIntervalMs: 20 }, providers: [TickHandlers] });
    client = await connectTestClient({ maxPoolSize: 2 });
    raw = client.db(dbName).collection('jobs');
  });
  afterAll(async () => {
    await client.close();
    await app.close();
  });

  /** A row written by something other than this library, sorted before every normal job (priority 100). */
  const insertRaw = async (label: string, fields: Record<string, unknown>) => {
    const at = new Date(Date.now() - 60_000);
    const { insertedId } = await raw.insertOne({
      name: 'tick',
      payload: { label },
      status: 'pending',
      runAt: at,
      priority: 100,
      attemptCount: 0,
      maxAttempts: 5,
      attempts: [],
      fencingToken: 0,
      createdAt: at,
      updatedAt: at,
      ...fields,
    });
    return insertedId;
  };

  const completed = (id: string) =>
    waitFor(async () => (await app.jobs.findById(id))?.status === 'completed', `job ${id} completed`, 3_000);

  it('marks a pending row whose claim the server rejects failed, and runs the due job behind it', async () => {
    const poison = await insertRaw('poison-claim', { fencingToken: 'x' });
    const normal = await app.jobs.enqueue('tick', { label: 'behind-claim' });
    await completed(normal.id);
    const row = await app.jobs.findById(poison.toHexString());
    expect(row).toMatchObject({ status: 'failed', lockedBy: null });
    expect(row?.lastError).toContain('could not be claimed');
    expect(ran).not.toContain('poison-claim');
  });

  it('marks a running row whose reclaim the server rejects failed, and runs the due job behind it', async () => {
    const poison = await insertRaw('poison-reclaim', {
      status: 'running',
      attemptCount: 'x',
      lockedBy: 'crashed#1',
      lockedUntil: new Date(Date.now() - 60_000),
    });
    const normal = await app.jobs.enqueue('tick', { label: 'behind-reclaim' });
    await completed(normal.id);
    await waitFor(
      async () => (await app.jobs.findById(poison.toHexString()))?.status === 'failed',
      'the poison running row to be failed',
      3_000,
    );
    expect((await app.jobs.findById(poison.toHexString()))?.lastError).toContain('could not be reclaimed');
    expect(ran).not.toContain('poison-reclaim');
  });

  it('skips a poison row it cannot mark failed either, and keeps running the rest', async () => {
    const setAside = jest.spyOn(app.repository, 'setAside').mockRejectedValue(new Error('injected: cannot write'));
    const poison = await insertRaw('poison-stuck', { fencingToken: 'x' });
    const first = await app.jobs.enqueue('tick', { label: 'after-stuck-1' });
    await completed(first.id);
    const second = await app.jobs.enqueue('tick', { label: 'after-stuck-2' });
    await completed(second.id);
    expect(await app.jobs.findById(poison.toHexString())).toMatchObject({ status: 'pending' });
    // Set aside in memory after the first failure: not probed again on every poll.
    expect(setAside).toHaveBeenCalledTimes(1);
    setAside.mockRestore();
    await raw.deleteOne({ _id: poison });
  });

  it('reports down with the error while claims keep failing, and up once they succeed again', async () => {
    expect((await app.jobs.workerStatus()).status).toBe('up');
    const claimDue = jest.spyOn(app.repository, 'claimDue').mockRejectedValue(new Error('injected: claims fail'));
    await waitFor(async () => (await app.jobs.workerStatus()).status === 'down', 'status down', 2_000);
    const down = await app.jobs.workerStatus();
    expect(down.reason).toContain('injected: claims fail');
    expect(down.database).toBe('up');
    claimDue.mockRestore();
    await waitFor(async () => (await app.jobs.workerStatus()).status === 'up', 'status up again', 2_000);
  });
});
