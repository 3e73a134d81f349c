import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Injectable, Logger } from '@nestjs/common';
import type { Document } from 'bson';
import type { MongoClient } from 'mongodb';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { JobClaimService } from '../../lib/claim/job-claim.service';
import type { ClaimedJob } from '../../lib/model/claimed-job';
import { MAX_ATTEMPT_HISTORY } from '../../lib/model/jobs.constants';
import { GATHER_MAX_MS } from '../../lib/worker/finishing-slots';
import { JobRunner } from '../../lib/worker/job-runner.service';
import { ErrorReplyProxy } from '../support/error-reply-proxy';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { storedJobRow } from '../support/stored-job-row';
import { connectTestClient, testMongoUri, uniqueDatabaseName } from '../support/test-database';

/**
 * Batch claims (issue 30): several due jobs taken in three commands (candidates in claim order, one bulk of fenced
 * takes each with its own lock id, one read by lock id), attacked with a lost reply, a refused row, a second service on
 * the same collection and another worker taking candidates first.
 */

@Injectable()
class Handlers {
  @JobHandler('batched')
  batched(_payload: unknown, _ctx: JobExecutionContext) {}

  @JobHandler('other')
  other(_payload: unknown, _ctx: JobExecutionContext) {}

  @JobHandler('failing', { maxAttempts: 100 })
  failing(_payload: unknown, _ctx: JobExecutionContext) {
    throw new Error('failed again');
  }
}

@Injectable()
class LimitedHandlers {
  @JobHandler('solo', { globalConcurrency: 1 })
  solo(_payload: unknown, _ctx: JobExecutionContext) {}
}

/** Room for any number of jobs of every name (the poll loop passes each name's room in its `concurrency`). */
const anyRoom = () => 100;

/** A batch claim's bulk: an `update` whose first statement sets `status: 'running'`. */
const isBatchTake = (command: Document) =>
  command.update === 'jobs' && (command.updates as Document[] | undefined)?.[0]?.u?.$set?.status === 'running';

describe('batch claims', () => {
  let proxy: ErrorReplyProxy;
  let client: MongoClient;
  const apps: JobsTestApp[] = [];
  const warnings: string[] = [];

  beforeAll(async () => {
    proxy = await ErrorReplyProxy.start(testMongoUri());
    client = await connectTestClient({ maxPoolSize: 4 });
    jest.spyOn(Logger.prototype, 'warn').mockImplementation((message: unknown) => {
      warnings.push(String(message));
    });
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    warnings.length = 0;
  });
  afterAll(async () => {
    jest.restoreAllMocks();
    await client?.close();
    await proxy?.close();
  });

  /** A claim service with no poll loop (the test claims), on `dbName`, through the proxy. */
  async function claimer(
    dbName: string,
    providers: (typeof Handlers | typeof LimitedHandlers)[] = [Handlers],
  ): Promise<{ app: JobsTestApp; claims: JobClaimService }> {
    const app = await createJobsTestApp({
      dbName,
      uri: proxy.uri,
      options: { worker: false, pollIntervalMs: 60_000, leaseMs: 30_000 },
      providers,
    });
    apps.push(app);
    return { app, claims: app.get(JobClaimService) };
  }
  /** A worker polling every 50 ms through the proxy, and every command it sends, in order. */
  async function workerSeeingCommands(
    dbName: string,
    options: { concurrency: number; claimBatchSize?: number },
  ): Promise<{ app: JobsTestApp; commands: Document[] }> {
    const commands: Document[] = [];
    const app = await createJobsTestApp({
      dbName,
      uri: proxy.uri,
      options: { pollIntervalMs: 50, ...options },
      providers: [Handlers],
      mongoose: {
        monitorCommands: true,
        connectionFactory: (connection: { getClient(): MongoClient }) => {
          connection.getClient().on('commandStarted', (event) => commands.push(event.command));
          return connection;
        },
      },
    });
    apps.push(app);
    return { app, commands };
  }
  const rawJobs = (dbName: string) => client.db(dbName).collection<Document>('jobs');
  const idsOf = (claims: ClaimedJob[] | null) => (claims ?? []).map((claim) => claim.doc._id.toHexString());

  it('takes jobs in claim order (priority, runAt, _id) within and across batches, each under its own lock', async () => {
    const dbName = uniqueDatabaseName('batch_order');
    const { app, claims } = await claimer(dbName);
    const past = (ms: number) => new Date(Date.now() - ms);
    const plan = [
      { priority: 0, runAt: past(5_000) },
      { priority: 5, runAt: past(1_000) },
      { priority: 0, runAt: past(9_000) },
      { priority: 5, runAt: past(2_000) },
      { priority: -1, runAt: past(60_000) },
      { priority: 0, runAt: past(7_000) },
    ];
    const enqueued: { id: string }[] = [];
    for (const [i, { priority, runAt }] of plan.entries()) {
      enqueued.push(await app.jobs.enqueue('batched', { i }, { priority, runAt }));
    }
    const order = [3, 1, 2, 5, 0, 4].map((i) => enqueued[i].id);

    const first = await claims.claimBatch(['batched'], 4, anyRoom);
    const second = await claims.claimBatch(['batched'], 4, anyRoom);
    const third = await claims.claimBatch(['batched'], 4, anyRoom);

    expect(idsOf(first)).toEqual(order.slice(0, 4));
    expect(idsOf(second)).toEqual(order.slice(4));
    expect(third).toEqual([]);
    const taken = [...(first ?? []), ...(second ?? [])];
    expect(new Set(taken.map((claim) => claim.lockId)).size).toBe(6);
    for (const claim of taken) {
      expect(claim.doc).toMatchObject({ status: 'running', lockedBy: claim.lockId, fencingToken: 1, attemptCount: 0 });
    }
  });

  it("takes of each name no more than its room, in claim order across names, and leaves that name's other rows", async () => {
    const dbName = uniqueDatabaseName('batch_room');
    const { app, claims } = await claimer(dbName);
    // 'other' (room 1 here) sorts first: its first row is taken, its next ones are left for a later claim.
    const others = [];
    for (let i = 0; i < 3; i += 1) others.push(await app.jobs.enqueue('other', { i }, { priority: 10 }));
    const batched = [];
    for (let i = 0; i < 3; i += 1) batched.push(await app.jobs.enqueue('batched', { i }));

    const taken = await claims.claimBatch(['batched', 'other'], 5, (name) => (name === 'other' ? 1 : 100));

    // The first 5 due rows are o0 o1 o2 b0 b1: o1 and o2 are over 'other''s room and stay pending, like b2 behind them.
    expect(idsOf(taken)).toEqual([others[0].id, batched[0].id, batched[1].id]);
    const left = await rawJobs(dbName).find({ status: 'pending' }).toArray();
    expect(left.map((row) => row._id.toHexString()).sort()).toEqual([others[1].id, others[2].id, batched[2].id].sort());
  });

  it('runs the rows of a batch whose answer was lost after it landed: read back by lock id, nothing charged', async () => {
    const dbName = uniqueDatabaseName('batch_lost_reply');
    const { app, claims } = await claimer(dbName);
    await app.jobs.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ name: 'batched', payload: { i } })));
    const rule = proxy.interceptReply({ match: isBatchTake, action: { lose: true } });

    const taken = await claims.claimBatch(['batched'], 5, anyRoom);

    expect(rule.answered).toBe(1);
    expect(taken).toHaveLength(5);
    const rows = await rawJobs(dbName).find({}).toArray();
    expect(rows.map((row) => [row.status, row.attemptCount, row.fencingToken])).toEqual(
      rows.map(() => ['running', 0, 1]),
    );
    expect(new Set(rows.map((row) => row.lockedBy))).toEqual(new Set((taken ?? []).map((claim) => claim.lockId)));
  });

  it('reads claimed rows back without their attempt history, which the failed attempt still extends on the server', async () => {
    const dbName = uniqueDatabaseName('batch_history');
    const { app, claims } = await claimer(dbName);
    // Three jobs that failed MAX_ATTEMPT_HISTORY times, each attempt with an 8 KB stack: 400 KB of history a row.
    const history = Array.from({ length: MAX_ATTEMPT_HISTORY }, (_, i) => ({
      at: new Date(Date.now() - 60_000 + i),
      error: `attempt ${i}`,
      errorClass: 'Error',
      stack: `Error: attempt ${i}\n${'    at somewhere (file.js:1:1)\n'.repeat(256)}`,
    }));
    const runAt = new Date(Date.now() - 1_000);
    const rows = [0, 1, 2].map((i) =>
      storedJobRow({
        name: 'failing',
        payload: { i },
        status: 'pending',
        runAt,
        attemptCount: 60,
        maxAttempts: 100,
        attempts: history,
        finishedAt: undefined,
      }),
    );
    await rawJobs(dbName).insertMany(rows);
    // A single claim whose answer is lost after it landed: read back by its lock id (the third read path).
    const lost = proxy.interceptReply({
      match: (command) => command.findAndModify === 'jobs' && command.query?.status === 'pending',
      action: { lose: true },
    });
    const single = await claims.claimNext();
    expect(lost.answered).toBe(1);
    const batch = await claims.claimBatch(['failing'], 5, anyRoom);

    expect(batch).toHaveLength(2);
    const taken = [single, ...(batch ?? [])].filter((claim): claim is ClaimedJob => claim !== null);
    expect(taken).toHaveLength(3);
    for (const claim of taken) {
      expect(claim.doc).not.toHaveProperty('attempts');
      expect(claim.doc).toMatchObject({ status: 'running', attemptCount: 60, payload: { i: expect.any(Number) } });
    }
    // The run fails; its write appends the attempt to the history it never read, which keeps its last 50 entries.
    await app.get(JobRunner).execute(taken[0]);
    const after = await app.jobs.findById(taken[0].doc._id.toHexString());
    expect(after?.attempts).toHaveLength(MAX_ATTEMPT_HISTORY);
    expect(after?.attempts[0].error).toBe('attempt 1');
    expect(after?.attempts.at(-1)).toMatchObject({ error: 'failed again', errorClass: 'Error' });
    expect(after).toMatchObject({ status: 'pending', attemptCount: 61 });
  });

  it('takes the other rows of a batch when the server refuses one, and leaves that one to a single claim to set aside', async () => {
    const dbName = uniqueDatabaseName('batch_refused_row');
    const { app, claims } = await claimer(dbName);
    await app.jobs.enqueueMany(Array.from({ length: 3 }, (_, i) => ({ name: 'batched', payload: { i } })));
    const at = new Date(Date.now() - 60_000);
    const poison = await rawJobs(dbName).insertOne(
      // $inc on a string fencing token is refused.
      storedJobRow({ name: 'batched', status: 'pending', runAt: at, fencingToken: 'x', finishedAt: undefined }),
    );

    const taken = await claims.claimBatch(['batched'], 4, anyRoom);

    expect(taken).toHaveLength(3);
    expect(await rawJobs(dbName).findOne({ _id: poison.insertedId })).toMatchObject({ status: 'pending' });
    expect(warnings.some((warning) => warning.includes('batch claim was refused by the server for 1 row'))).toBe(true);
    // Until the next poll, the step is one claim, which sets the refused row aside and takes nothing else.
    expect(await claims.claimBatch(['batched'], 4, anyRoom)).toBeNull();
    expect(await claims.claimNext()).toBeNull();
    expect(await rawJobs(dbName).findOne({ _id: poison.insertedId })).toMatchObject({ status: 'failed' });
  });

  it('never gives one row to two services claiming batches on one collection at once', async () => {
    const dbName = uniqueDatabaseName('batch_two_services');
    const a = await claimer(dbName);
    const b = await claimer(dbName);
    await a.app.jobs.enqueueMany(Array.from({ length: 120 }, (_, i) => ({ name: 'batched', payload: { i } })));

    const drain = async (claims: JobClaimService) => {
      const ids: string[] = [];
      for (;;) {
        const batch = (await claims.claimBatch(['batched'], 8, anyRoom)) ?? [];
        if (batch.length === 0) {
          // Declined (the other took every candidate) or empty: one claim says which.
          const one = await claims.claimNext();
          if (!one) return ids;
          ids.push(one.doc._id.toHexString());
        } else ids.push(...idsOf(batch));
      }
    };
    const [fromA, fromB] = await Promise.all([drain(a.claims), drain(b.claims)]);

    expect(fromA.length + fromB.length).toBe(120);
    expect(new Set([...fromA, ...fromB]).size).toBe(120);
    const rows = await rawJobs(dbName).find({}).toArray();
    expect(rows.every((row) => row.status === 'running' && row.fencingToken === 1)).toBe(true);
  });

  it('asks only for the names it is given, and leaves a name with fleet-wide limits to single claims', async () => {
    const dbName = uniqueDatabaseName('batch_names');
    const { app, claims } = await claimer(dbName, [Handlers, LimitedHandlers]);
    await app.jobs.enqueueMany([
      { name: 'other', payload: {} },
      { name: 'batched', payload: {} },
      { name: 'solo', payload: {} },
    ]);

    const taken = await claims.claimBatch(['batched'], 5, anyRoom);

    expect((taken ?? []).map((claim) => claim.doc.name)).toEqual(['batched']);
    expect((await rawJobs(dbName).findOne({ name: 'other' }))?.status).toBe('pending');
    // A limited name among those asked: no batch (its claim takes a slot with the row), the caller claims one job.
    expect(await claims.claimBatch(['solo', 'other'], 5, anyRoom)).toBeNull();
    expect((await rawJobs(dbName).findOne({ name: 'solo' }))?.status).toBe('pending');
  });

  it('claims a backlog one job per findOneAndUpdate with claimBatchSize 1, in batches of at most claimBatchSize otherwise', async () => {
    const claimCommands = async (claimBatchSize?: number) => {
      const dbName = uniqueDatabaseName('batch_size');
      const { app, commands } = await workerSeeingCommands(dbName, {
        concurrency: 8,
        ...(claimBatchSize ? { claimBatchSize } : {}),
      });
      await app.jobs.enqueueMany(Array.from({ length: 40 }, (_, i) => ({ name: 'batched', payload: { i } })));
      await waitFor(async () => (await rawJobs(dbName).countDocuments({ status: 'completed' })) === 40, '40 completed');
      return {
        takes: commands.filter(isBatchTake).length,
        largestTake: Math.max(0, ...commands.filter(isBatchTake).map((command) => command.updates.length)),
        peeks: commands.filter((command) => command.find === 'jobs' && command.limit > 1).length,
        singles: commands.filter((command) => command.findAndModify === 'jobs' && command.query?.status === 'pending')
          .length,
      };
    };

    const unbatched = await claimCommands(1);
    expect(unbatched).toMatchObject({ takes: 0, peeks: 0 });
    expect(unbatched.singles).toBeGreaterThanOrEqual(40);
    const batched = await claimCommands();
    expect(batched.takes).toBeGreaterThanOrEqual(1);
    expect(batched.largestTake).toBeGreaterThan(3);
    expect(batched.singles).toBeLessThan(40);
    const small = await claimCommands(3);
    expect(small.takes).toBeGreaterThanOrEqual(1);
    expect(small.largestTake).toBe(3);
  });

  it('claims jobs that ended together again together: a backlog drains in batches, not a single claim a round', async () => {
    const dbName = uniqueDatabaseName('batch_regroup');
    const { commands } = await workerSeeingCommands(dbName, { concurrency: 4 });
    // Enqueued before the worker hears of them: its burst opens with one single claim, then a batch for the other three
    // slots. Left alone, those two groups (one job, three jobs) would each be claimed and completed apart, every round.
    await rawJobs(dbName).insertMany(
      Array.from({ length: 64 }, (_, i) =>
        storedJobRow({ name: 'batched', payload: { i }, status: 'pending', runAt: new Date(0), finishedAt: undefined }),
      ),
    );
    await waitFor(async () => (await rawJobs(dbName).countDocuments({ status: 'completed' })) === 64, '64 completed');

    const singles = commands.filter(
      (command) => command.findAndModify === 'jobs' && command.query?.status === 'pending',
    ).length;
    const takes = commands.filter(isBatchTake).map((command) => command.updates.length);
    // 16 rounds of 4: apart, a single claim in each (16); gathered, the opening one and a few after a slow write.
    expect(singles).toBeLessThanOrEqual(6);
    expect(takes.filter((size) => size === 4).length).toBeGreaterThanOrEqual(10);
  });

  it('does not hold the free slots for outcome writes that keep failing: only slots about to free are waited for', async () => {
    const dbName = uniqueDatabaseName('batch_stuck_outcomes');
    const app = await createJobsTestApp({
      dbName,
      uri: proxy.uri,
      options: { concurrency: 3, pollIntervalMs: 1_000 },
      providers: [Handlers],
    });
    apps.push(app);
    // Waits of the poll pacing shorter than a poll interval: a batch claim gathering (nothing else here waits so little).
    const pacing = (app.get(JobRunner) as unknown as { pacing: { wait(ms: number): Promise<void> } }).pacing;
    const gatherWaits = jest.spyOn(pacing, 'wait');
    const shortWaits = () => gatherWaits.mock.calls.filter(([ms]) => ms <= GATHER_MAX_MS).length;
    // Two jobs whose completion the server refuses with a transient error, for as long as the test runs: their slots
    // stay finishing (the write is retried while the lease lives), with one slot free beside them.
    const stuck = new Set(
      (await app.jobs.enqueueMany([{ name: 'batched' }, { name: 'batched' }])).map((job) => job.id),
    );
    const refusals = proxy.answerWithError({
      match: (command) =>
        command.update === 'jobs' &&
        (command.updates as Document[]).some((update) => stuck.has(String(update.q?._id)) && update.q?.lockedBy),
      code: 11601,
      codeName: 'Interrupted',
      times: 100_000,
    });
    try {
      await waitFor(() => refusals.hits >= 4, 'the two completions refused twice each');
      const before = shortWaits();
      await app.jobs.enqueueMany(Array.from({ length: 40 }, (_, i) => ({ name: 'batched', payload: { i } })));
      await waitFor(
        async () => (await rawJobs(dbName).countDocuments({ status: 'completed' })) === 40,
        '40 completed beside the two stuck',
      );
      // Before, each of the 40 claims into the one free slot waited out the bound for the two stuck slots.
      expect(shortWaits() - before).toBeLessThanOrEqual(3);
      expect(await rawJobs(dbName).countDocuments({ status: 'running' })).toBe(2);
    } finally {
      refusals.remove();
    }
  });

  it('hands back every row of a batch still in flight when the worker shuts down: none runs, none is charged', async () => {
    const dbName = uniqueDatabaseName('batch_shutdown');
    const release = deferred();
    const taking = deferred();
    const app = await createJobsTestApp({
      dbName,
      uri: proxy.uri,
      options: { concurrency: 8, pollIntervalMs: 50, shutdownGraceMs: 2_000 },
      providers: [Handlers],
    });
    // The batch's take lands, and its answer is held until the app is closing.
    const held = proxy.delayReply({
      match: (command) => {
        if (!isBatchTake(command)) return false;
        taking.resolve();
        return true;
      },
      until: release.promise,
    });
    await app.jobs.enqueueMany(Array.from({ length: 6 }, (_, i) => ({ name: 'batched', payload: { i } })));
    await taking.promise;
    const closing = app.close();
    release.resolve();
    await closing;

    expect(held.answered).toBe(1);
    const rows = await rawJobs(dbName).find({}).toArray();
    const handedBack = rows.filter((row) => row.status === 'pending');
    // The first claim of the burst was single (its job ran); the batch took the others and handed every one back.
    // Nothing else is sent while a batch is in flight, so the batch took the 5 others.
    expect(rows.filter((row) => row.status === 'completed')).toHaveLength(1);
    expect(handedBack).toHaveLength(5);
    for (const row of handedBack) {
      // Taken once (fencing token 1), then handed back: not charged, not locked.
      expect(row).toMatchObject({ attemptCount: 0, fencingToken: 1 });
      expect(row.lockedBy ?? null).toBeNull();
    }
  });
});
