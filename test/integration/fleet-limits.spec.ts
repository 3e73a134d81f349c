import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { Collection, Db, MongoClient } from 'mongodb';
import { type JobExecutionContext, JobHandler, type JobsModuleOptions } from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { type LimitRecord, maxOverlap, maxStartsInWindow, recordStart } from '../support/limit-records';
import { sleep } from '../support/sleep';
import { connectTestClient, uniqueDatabaseName } from '../support/test-database';

/** Where the handlers of the current test record their executions (set per test). */
let records: Collection<LimitRecord>;

/** Works 1–4 ms, recording start and end. */
async function work(payload: { ms?: number; group?: string; seq?: number }, ctx: JobExecutionContext) {
  const end = await recordStart(records, { jobId: ctx.jobId, name: ctx.name, group: payload.group, seq: payload.seq });
  await sleep(payload.ms ?? 1 + Math.random() * 3);
  await end();
}

@Injectable()
class GlobalHandlers {
  @JobHandler('report.build', { globalConcurrency: 2 })
  build(payload: { ms?: number }, ctx: JobExecutionContext) {
    return work(payload, ctx);
  }
}

@Injectable()
class RateHandlers {
  @JobHandler('api.call', { rateLimit: { max: 10, perMs: 1000 } })
  call(payload: { ms?: number }, ctx: JobExecutionContext) {
    return work(payload, ctx);
  }
}

@Injectable()
class GroupHandlers {
  @JobHandler('tenant.sync', { groupConcurrency: 1 })
  sync(payload: { group: string; seq: number }, ctx: JobExecutionContext) {
    return work(payload, ctx);
  }
}

describe('fleet-wide limits hold across worker apps on one collection', () => {
  let client: MongoClient;
  let db: Db;
  const apps: JobsTestApp[] = [];
  beforeAll(async () => {
    client = await connectTestClient();
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    await db?.dropDatabase().catch(() => undefined);
  });
  afterAll(async () => {
    await client?.close();
  });

  const startApps = async (
    label: string,
    count: number,
    providers: (new (...args: never[]) => unknown)[],
    options: JobsModuleOptions = {},
  ) => {
    const dbName = uniqueDatabaseName(label);
    db = client.db(dbName);
    records = db.collection<LimitRecord>('executions');
    for (let i = 0; i < count; i += 1) {
      apps.push(
        await createJobsTestApp({
          dbName,
          providers,
          options: { pollIntervalMs: 20, concurrency: 4, workerId: `${label}-${i}`, ...options },
        }),
      );
    }
    return apps.slice(-count);
  };

  const waitForAll = async (app: JobsTestApp, total: number, timeoutMs = 60_000) => {
    await waitFor(async () => (await app.jobs.stats()).completed === total, `all ${total} jobs to complete`, timeoutMs);
  };

  it('globalConcurrency 2: 300 jobs on three apps never overlap more than 2, and all complete once', async () => {
    const [a] = await startApps('limit_global', 3, [GlobalHandlers]);
    await a.jobs.enqueueMany(Array.from({ length: 300 }, () => ({ name: 'report.build', payload: {} })));
    await waitForAll(a, 300);
    const executions = await records.find().toArray();
    expect(executions).toHaveLength(300);
    expect(new Set(executions.map((e) => e.jobId)).size).toBe(300);
    expect(maxOverlap(executions)).toBe(2); // 2, not less: the limit was reached, so it was tested
    // Every slot was given back by the writes that finished the jobs.
    expect(await db.collection('jobs').countDocuments({ concurrencySlot: { $exists: true } })).toBe(0);
  }, 120_000);

  it('rateLimit 10 per 1000 ms: 60 jobs on two apps, no 1 s window holds more than 10 starts', async () => {
    const [a] = await startApps('limit_rate', 2, [RateHandlers]);
    await a.jobs.enqueueMany(Array.from({ length: 60 }, () => ({ name: 'api.call', payload: { ms: 1 } })));
    await waitForAll(a, 60);
    // A start is the claim (the row's startedAt, the clock the token was taken by), not the handler's first line.
    const rows = await db
      .collection('jobs')
      .find({}, { projection: { startedAt: 1 } })
      .toArray();
    const starts = rows.map((row) => (row.startedAt as Date).getTime());
    expect(starts).toHaveLength(60);
    expect(maxStartsInWindow(starts, 1000)).toBe(10);
  }, 60_000);

  it('groupConcurrency 1: 5 groups × 40 jobs on three apps, one at a time per group, groups in parallel, in claim order', async () => {
    const [a] = await startApps('limit_group', 3, [GroupHandlers]);
    const groups = ['t1', 't2', 't3', 't4', 't5'];
    // Interleaved, so a group's jobs are not a contiguous run of the claim order.
    await a.jobs.enqueueMany(
      Array.from({ length: 200 }, (_, i) => {
        const group = groups[i % groups.length];
        return { name: 'tenant.sync', payload: { group, seq: Math.floor(i / groups.length) }, options: { group } };
      }),
    );
    await waitForAll(a, 200);
    const executions = await records.find().toArray();
    expect(executions).toHaveLength(200);
    for (const group of groups) {
      const own = executions.filter((e) => e.group === group).sort((x, y) => x.start - y.start);
      expect({ group, overlap: maxOverlap(own) }).toEqual({ group, overlap: 1 });
      expect(own.map((e) => e.seq)).toEqual(Array.from({ length: 40 }, (_, i) => i));
    }
    expect(maxOverlap(executions)).toBeGreaterThan(1);
    expect(await db.collection('jobs').countDocuments({ groupSlot: { $exists: true } })).toBe(0);
  }, 120_000);
});
