import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { Collection, Document, MongoClient } from 'mongodb';
import { mongo } from 'mongoose';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { JobClaimService } from '../../lib/claim/job-claim.service';
import { DEFAULT_JOBS_OPTIONS } from '../../lib/model/jobs.constants';
import { JobRunner } from '../../lib/worker/job-runner.service';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { sleep } from '../support/sleep';
import { connectTestClient, uniqueDatabaseName } from '../support/test-database';

let gate = deferred();
const active = new Map<string, number>();
const maxActive = new Map<string, number>();

async function hold(ctx: JobExecutionContext): Promise<void> {
  active.set(ctx.name, (active.get(ctx.name) ?? 0) + 1);
  maxActive.set(ctx.name, Math.max(maxActive.get(ctx.name) ?? 0, active.get(ctx.name) ?? 0));
  try {
    await gate.promise;
  } finally {
    active.set(ctx.name, (active.get(ctx.name) ?? 0) - 1);
  }
}

@Injectable()
class BlockingHandlers {
  @JobHandler('block')
  block(_payload: unknown, ctx: JobExecutionContext) {
    return hold(ctx);
  }

  @JobHandler('limited', { concurrency: 2 })
  limited(_payload: unknown, ctx: JobExecutionContext) {
    return hold(ctx);
  }
}

/** Delays every claim and reclaim round trip by `delayMs` and records how many overlap, and the order of events. */
function instrumentTakes(app: JobsTestApp, delayMs: number) {
  const take = app.stores.claim.take.bind(app.stores.claim);
  const probe = { inFlight: 0, maxInFlight: 0, pending: 0, batches: [] as number[], log: [] as string[] };
  const takeEach = app.stores.claim.takeEach.bind(app.stores.claim);
  app.stores.claim.takeEach = async (rows, ...args) => {
    await sleep(delayMs);
    const answer = await takeEach(rows, ...args);
    probe.batches.push(answer.matched);
    return answer;
  };
  const earliestRunAt = app.stores.claim.earliestRunAt.bind(app.stores.claim);
  // An idle worker's poll reads the next due time instead of sending a claim that would find nothing.
  app.stores.claim.earliestRunAt = async (...args) => {
    probe.inFlight += 1;
    probe.maxInFlight = Math.max(probe.maxInFlight, probe.inFlight);
    try {
      await sleep(delayMs);
      const runAt = await earliestRunAt(...args);
      probe.log.push(`due:${runAt ? 'some' : 'none'}`);
      return runAt;
    } finally {
      probe.inFlight -= 1;
    }
  };
  app.stores.claim.take = async (source, ...args) => {
    probe.inFlight += 1;
    probe.maxInFlight = Math.max(probe.maxInFlight, probe.inFlight);
    if (source === 'pending') probe.pending += 1;
    try {
      await sleep(delayMs);
      const row = await take(source, ...args);
      probe.log.push(`${source}:${row ? 'row' : 'none'}`);
      return row;
    } finally {
      probe.inFlight -= 1;
    }
  };
  return probe;
}

describe('claims in flight and batch claims', () => {
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    gate.resolve();
    await Promise.all(apps.splice(0).map((app) => app.close()));
    gate = deferred();
    active.clear();
    maxActive.clear();
  });

  const start = async (options: Record<string, unknown>) => {
    const app = await createJobsTestApp({
      dbName: uniqueDatabaseName('claims_in_flight'),
      options: { pollIntervalMs: 50, ...options },
      providers: [BlockingHandlers],
    });
    apps.push(app);
    return app;
  };

  it('fills 50 free slots with one claim and then batches: a few commands, not one per slot', async () => {
    const app = await start({ concurrency: 50 });
    const probe = instrumentTakes(app, 20);
    await app.jobs.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ name: 'block', payload: { i } })));
    await waitFor(() => (active.get('block') ?? 0) === 50, 'all 50 jobs running');
    expect(app.get(JobRunner).pollState().running).toBe(50);
    // The first claim finds a backlog; then batches of up to claimBatchSize (32) take the rest, each claiming every free
    // slot it can (nothing else in flight beside it).
    expect(probe.batches.length).toBeGreaterThanOrEqual(2);
    expect(probe.batches.every((taken) => taken <= DEFAULT_JOBS_OPTIONS.claimBatchSize)).toBe(true);
    expect(
      probe.batches.reduce((sum, taken) => sum + taken, 0) + probe.log.filter((e) => e === 'pending:row').length,
    ).toBe(50);
    // Claim commands that took jobs (empty polls before the enqueue aside): one single, then ceil(49 / 32) batches, give
    // or take one if a poll's single claim caught the enqueue halfway.
    expect(probe.log.filter((e) => e === 'pending:row').length + probe.batches.length).toBeLessThanOrEqual(4);
    expect(probe.maxInFlight).toBe(1);
  });

  it('never sends a claim for a name whose free capacity in-flight claims already hold', async () => {
    const app = await start({ concurrency: 30 });
    const release = jest.spyOn(app.stores.outcome, 'release');
    const probe = instrumentTakes(app, 20);
    // The unlimited jobs sort first: by the time the limited ones are next, several claims are in flight at once.
    await app.jobs.enqueueMany([
      ...Array.from({ length: 20 }, (_, i) => ({ name: 'block', payload: { i }, options: { priority: 5 } })),
      ...Array.from({ length: 10 }, (_, i) => ({ name: 'limited', payload: { i } })),
    ]);
    await waitFor(() => (active.get('block') ?? 0) === 20 && (active.get('limited') ?? 0) === 2, '22 jobs running');
    // The batches ask only for 'block' (the one name with room for a batch); 'limited' is claimed one at a time.
    expect(probe.batches.length).toBeGreaterThan(0);
    expect(maxActive.get('limited')).toBe(2);
    // Prefer not sending: no claim came back for a name at its limit only to be handed back.
    expect(release).not.toHaveBeenCalled();
    expect(await app.jobs.stats()).toMatchObject({ running: 22, pending: 8 });
    gate.resolve();
    await waitFor(async () => (await app.jobs.stats()).completed === 30, '30 completed jobs');
    expect(maxActive.get('limited')).toBe(2);
    expect(release).not.toHaveBeenCalled();
  });

  it('claims a backlog in batches, then sends one step per poll on an empty queue, not one per free slot', async () => {
    const app = await start({ concurrency: 100, pollIntervalMs: 30 });
    const probe = instrumentTakes(app, 5);
    gate.resolve(); // jobs finish at once
    await app.jobs.enqueueMany(Array.from({ length: 40 }, (_, i) => ({ name: 'block', payload: { i } })));
    await waitFor(async () => (await app.jobs.stats()).completed === 40, '40 completed jobs');
    expect(probe.batches.length).toBeGreaterThan(0);
    // The queue is empty now: each poll is one step (a read of the next due time: a claim would find nothing), then a
    // sleep, whatever the free slots.
    const runner = app.get(JobRunner) as unknown as { pacing: { wait: (ms: number) => Promise<void> } };
    const wait = runner.pacing.wait.bind(runner.pacing);
    runner.pacing.wait = (ms) => {
      probe.log.push('sleep');
      return wait(ms);
    };
    // The burst that ran the last jobs may still have claims in flight: the loop sleeps only once they have all
    // landed, so count from the first sleep on.
    const drained = probe.log.length;
    await waitFor(() => probe.log.slice(drained).includes('sleep'), 'the last burst to drain');
    probe.maxInFlight = 0;
    const from = probe.log.push('mark');
    await waitFor(() => probe.log.slice(from).filter((entry) => entry === 'sleep').length >= 6, 'six empty polls');
    const polls = probe.log.slice(from).join(' ').split('sleep').slice(1, -1);
    for (const poll of polls) expect(poll.match(/pending:none|due:none/g)).toHaveLength(1);
    expect(probe.maxInFlight).toBe(1);
  });
});

describe('concurrent claim steps in the claim service', () => {
  let client: MongoClient | undefined;
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    await client?.close();
    client = undefined;
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });

  const service = async () => {
    const dbName = uniqueDatabaseName('claim_steps');
    const app = await createJobsTestApp({
      dbName,
      options: { worker: false, pollIntervalMs: 60_000 },
      providers: [BlockingHandlers],
    });
    apps.push(app);
    client = await connectTestClient({ maxPoolSize: 2 });
    return { app, raw: client.db(dbName).collection('jobs') as Collection<Document> };
  };

  it('searches for expired leases once when several claim steps run at once', async () => {
    const { app } = await service();
    const probe = instrumentTakes(app, 10);
    await app.jobs.enqueueMany(Array.from({ length: 4 }, (_, i) => ({ name: 'block', payload: { i } })));
    const claims = app.get(JobClaimService);
    const taken = await Promise.all([claims.claimNext(), claims.claimNext(), claims.claimNext(), claims.claimNext()]);
    expect(taken.every((claim) => claim !== null)).toBe(true);
    expect(new Set(taken.map((claim) => claim?.doc._id.toHexString())).size).toBe(4);
    expect(probe.log.filter((entry) => entry.startsWith('running:'))).toEqual(['running:none']);
  });

  it('sets a refused row aside once when two concurrent claim steps both hit it', async () => {
    const { app, raw } = await service();
    const at = new Date(Date.now() - 60_000);
    const poison = await raw.insertOne({
      name: 'block',
      payload: {},
      status: 'pending',
      runAt: at,
      priority: 100,
      attemptCount: 0,
      maxAttempts: 5,
      attempts: [],
      fencingToken: 'x', // $inc on it is refused
      createdAt: at,
      updatedAt: at,
    });
    await app.jobs.enqueueMany([{ name: 'block' }, { name: 'block' }]);
    const setAside = jest
      .spyOn(app.stores.claim, 'setAside')
      .mockRejectedValue(new mongo.MongoServerError({ message: 'injected: refused to mark failed', code: 2 }));
    const claims = app.get(JobClaimService);
    const taken = await Promise.all([claims.claimNext(), claims.claimNext()]);
    expect(taken.map((claim) => claim?.doc.name)).toEqual(['block', 'block']);
    expect(setAside).toHaveBeenCalledTimes(1);
    expect(await raw.findOne({ _id: poison.insertedId })).toMatchObject({ status: 'pending' });
  });
});
