import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { Collection, MongoClient } from 'mongodb';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { type LimitRecord, maxOverlap, recordStart } from '../support/limit-records';
import { notReached, reached, type ScenarioRun, untilPreconditionReached } from '../support/precondition';
import { scratchDatabases } from '../support/scratch-databases';
import { sleep } from '../support/sleep';
import { TcpProxy } from '../support/tcp-proxy';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

const JOBS = 60;
const OUTAGES = 3;
const OUTAGE_MS = 400;
const FAST_FAILING_DRIVER = { serverSelectionTimeoutMS: 500, heartbeatFrequencyMS: 500, connectTimeoutMS: 500 };

/** Written straight to the server by the test's own client: the outage never touches the evidence. */
let records: Collection<LimitRecord>;

@Injectable()
class OneAtATime {
  @JobHandler('outage.limited', { globalConcurrency: 1 })
  async run(_payload: unknown, ctx: JobExecutionContext) {
    const end = await recordStart(records, { jobId: ctx.jobId, name: ctx.name, worker: ctx.lockId.split('#')[0] });
    await sleep(30);
    await end();
  }
}

/**
 * One run from scratch (own database and apps): the flaky app alone first, the steady one joining during the outages,
 * every job completed, the limit checked. Reached when both apps ran jobs, so the limit was held between them, not by
 * one process alone (on a loaded machine the flaky app may run them all before the steady one is up).
 */
async function outagesScenario(client: MongoClient, proxy: TcpProxy, dbNames: string[]): Promise<ScenarioRun<void>> {
  const dbName = uniqueDatabaseName('chaos_limit_outage');
  dbNames.push(dbName);
  const db = client.db(dbName);
  records = db.collection<LimitRecord>('executions');
  const apps: JobsTestApp[] = [];
  try {
    const options = { pollIntervalMs: 20, leaseMs: 1000, concurrency: 2 };
    const producer = await createJobsTestApp({ dbName, options: { worker: false } });
    apps.push(producer);
    await producer.jobs.enqueueMany(Array.from({ length: JOBS }, () => ({ name: 'outage.limited' })));
    // The flaky app's claims, renewals and outcome writes can be lost in flight, or land with their answer lost. It
    // starts alone, so it holds the slot first; the steady one joins while the outages go on.
    apps.push(
      await createJobsTestApp({
        dbName,
        uri: proxy.uri,
        mongoose: FAST_FAILING_DRIVER,
        providers: [OneAtATime],
        options: { ...options, workerId: 'flaky' },
      }),
    );
    const outages = (async () => {
      for (let i = 0; i < OUTAGES; i += 1) {
        await sleep(250);
        await proxy.drop(OUTAGE_MS);
      }
    })();
    await sleep(300);
    apps.push(
      await createJobsTestApp({ dbName, providers: [OneAtATime], options: { ...options, workerId: 'steady' } }),
    );
    await outages;
    await waitFor(async () => (await producer.jobs.stats()).completed === JOBS, `all ${JOBS} jobs to complete`, 60_000);
    const executions = await records.find().toArray();
    expect(new Set(executions.map((e) => e.jobId)).size).toBe(JOBS);
    expect(executions.every((e) => e.end !== undefined)).toBe(true);
    expect(maxOverlap(executions)).toBe(1);
    expect(await db.collection('jobs').countDocuments({ concurrencySlot: { $exists: true } })).toBe(0);
    const workers = [...new Set(executions.map((e) => e.worker))].sort();
    return workers.length === 2 ? reached() : notReached(`only ${workers.join(', ')} ran jobs`);
  } finally {
    for (const app of apps.reverse()) await app.close();
  }
}

describe('chaos: a fleet-wide limit while one worker’s database connection keeps dropping', () => {
  const scratch = scratchDatabases();
  let proxy: TcpProxy;

  beforeAll(async () => {
    proxy = await TcpProxy.start(testMongoUri());
  });

  afterAll(async () => {
    await proxy?.close();
  });

  it(
    `${JOBS} jobs of a globalConcurrency-1 name on two apps, one behind ${OUTAGES} outages: never two at once, none lost`,
    async () => {
      // Both apps ran jobs (the scenario's precondition), so the limit was held between them.
      await untilPreconditionReached('both apps ran jobs', () => outagesScenario(scratch.client, proxy, scratch.names));
    },
    3 * 90_000,
  );
});
