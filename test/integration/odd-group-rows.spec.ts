import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { MongoClient, ObjectId } from 'mongodb';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { connectTestClient, uniqueDatabaseName } from '../support/test-database';

/** Job ids the handlers ran. */
const ran = new Set<string>();

@Injectable()
class OddGroupHandlers {
  @JobHandler('odd.grouped', { groupConcurrency: 1 })
  async grouped(_payload: unknown, ctx: JobExecutionContext): Promise<void> {
    ran.add(ctx.jobId);
  }

  @JobHandler('odd.plain')
  async plain(_payload: unknown, ctx: JobExecutionContext): Promise<void> {
    ran.add(ctx.jobId);
  }
}

/** `group` values another tool, or someone with the raw driver, may write; `null` among them. */
const ODD_GROUPS: Record<string, unknown> = {
  number: 7,
  empty: '',
  object: { tenant: 't-1' },
  array: ['a', 'b'],
};

/**
 * Rows whose `group` is null or of an odd type, sorted before the normal jobs: the null row runs as ungrouped, the odd
 * ones are set aside as `failed` (their group is not a non-empty string), and every normal job behind them runs.
 */
describe.each(['odd.grouped', 'odd.plain'])('rows of %s with an odd group', (name) => {
  let app: JobsTestApp | undefined;
  let client: MongoClient | undefined;

  afterEach(async () => {
    await app?.close();
    await client?.close();
    ran.clear();
  });

  it('run the null row as ungrouped, set aside the odd ones, and run every normal job behind them', async () => {
    const dbName = uniqueDatabaseName('odd_group');
    client = await connectTestClient();
    const raw = client.db(dbName).collection('jobs');
    const insertRaw = async (group: unknown): Promise<ObjectId> => {
      const at = new Date(Date.now() - 60_000);
      const { insertedId } = await raw.insertOne({
        name,
        payload: null,
        status: 'pending',
        runAt: at,
        // Before every normal job: each claim meets these rows first.
        priority: 100,
        attemptCount: 0,
        maxAttempts: 3,
        attempts: [],
        fencingToken: 0,
        createdAt: at,
        updatedAt: at,
        group,
      });
      return insertedId;
    };
    const nullRow = (await insertRaw(null)).toHexString();
    const odd = new Map<string, string>();
    for (const [label, group] of Object.entries(ODD_GROUPS)) odd.set(label, (await insertRaw(group)).toHexString());

    app = await createJobsTestApp({ dbName, options: { pollIntervalMs: 20 }, providers: [OddGroupHandlers] });
    const normal: string[] = [];
    for (const group of ['a', 'a', 'b', undefined, 'c']) {
      normal.push((await app.jobs.enqueue(name, null, group === undefined ? {} : { group })).id);
    }

    const jobs = app.jobs;
    const expected: Record<string, string> = { null: 'completed' };
    const ids: Record<string, string> = { null: nullRow };
    normal.forEach((id, index) => {
      ids[`normal ${index}`] = id;
      expected[`normal ${index}`] = 'completed';
    });
    for (const [label, id] of odd) {
      ids[label] = id;
      expected[label] = 'failed';
    }
    const statuses = async () => {
      const found: Record<string, string | undefined> = {};
      for (const [label, id] of Object.entries(ids)) found[label] = (await jobs.findById(id))?.status;
      return found;
    };
    // On a timeout the statuses below show which rows stalled.
    await waitFor(
      async () => JSON.stringify(await statuses()) === JSON.stringify(expected),
      'every normal job and the null row completed, the odd rows failed',
    ).catch(() => undefined);
    expect(await statuses()).toEqual(expected);
    expect(ran.has(nullRow)).toBe(true);
    for (const [label, id] of odd) {
      const row = await jobs.findById(id);
      expect({ label, ran: ran.has(id), lastError: row?.lastError }).toEqual({
        label,
        ran: false,
        lastError: expect.stringMatching(/group .* is not a non-empty string/),
      });
    }
  });
});
