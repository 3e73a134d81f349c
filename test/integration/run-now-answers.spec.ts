import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { type MongoClient, ObjectId } from 'mongodb';
import { type JobExecutionContext, JobHandler, type JobsModuleOptions } from '../../lib';
import { concurrencySlotKey, groupSlotKey } from '../../lib/claim/slot-keys';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { sleep } from '../support/sleep';
import { connectTestClient, uniqueDatabaseName } from '../support/test-database';

/** Handlers wait on this until the test lets them go. */
let gate = deferred();
/** Attempt numbers the handlers started, by job id. */
const started = new Map<string, number>();
/** Every execution of `answers.quick-*`, in order. */
const ran: string[] = [];
let active = 0;
let maxActive = 0;

async function gated(ctx: JobExecutionContext): Promise<void> {
  started.set(ctx.jobId, ctx.attempt);
  active += 1;
  maxActive = Math.max(maxActive, active);
  try {
    await gate.promise;
  } finally {
    active -= 1;
  }
}

async function quick(ctx: JobExecutionContext): Promise<void> {
  ran.push(ctx.jobId);
  active += 1;
  maxActive = Math.max(maxActive, active);
  await sleep(1 + Math.random() * 4);
  active -= 1;
}

@Injectable()
class AnswerHandlers {
  @JobHandler('answers.a')
  a(_payload: unknown, ctx: JobExecutionContext) {
    return gated(ctx);
  }

  @JobHandler('answers.b')
  b(_payload: unknown, ctx: JobExecutionContext) {
    return gated(ctx);
  }

  /** Two names that work a few ms: each handler's own concurrency (the module's) alone does not bound them both. */
  @JobHandler('answers.quick-a')
  quickA(_payload: unknown, ctx: JobExecutionContext) {
    return quick(ctx);
  }

  @JobHandler('answers.quick-b')
  quickB(_payload: unknown, ctx: JobExecutionContext) {
    return quick(ctx);
  }

  @JobHandler('answers.grouped', { groupConcurrency: 1 })
  grouped(_payload: unknown, ctx: JobExecutionContext) {
    return gated(ctx);
  }

  @JobHandler('answers.global', { globalConcurrency: 1 })
  global(_payload: unknown, ctx: JobExecutionContext) {
    return gated(ctx);
  }
}

describe('runNow answers', () => {
  const apps: JobsTestApp[] = [];
  let client: MongoClient | undefined;

  afterEach(async () => {
    gate.resolve();
    await Promise.all(apps.splice(0).map((app) => app.close()));
    await client?.close();
    client = undefined;
    gate = deferred();
    started.clear();
    ran.length = 0;
    active = 0;
    maxActive = 0;
  });

  async function start(options: JobsModuleOptions) {
    const dbName = uniqueDatabaseName('run_now_answers');
    const app = await createJobsTestApp({ dbName, options, providers: [AnswerHandlers] });
    apps.push(app);
    client = await connectTestClient();
    return { app, raw: client.db(dbName).collection('jobs') };
  }

  /** runNow's answer, or the handlers it started meanwhile (it must not start one past a limit). */
  async function answerOf(app: JobsTestApp, id: string, startedBefore: number) {
    let answered = false;
    const outcome = app.jobs.runNow(id).finally(() => {
      answered = true;
    });
    await waitFor(() => answered || started.size > startedBefore, 'runNow to answer or start a handler');
    gate.resolve();
    return outcome;
  }

  it.each([
    ['runNow holds the only slot', false],
    ['the poll loop holds the only slot', true],
  ])('answers conflict(busy) at the total concurrency, with the row untouched (%s)', async (_label, worker) => {
    const { app, raw } = await start({ worker, concurrency: 1 });
    const first = await app.jobs.enqueue('answers.a');
    const firstRun = worker ? undefined : app.jobs.runNow(first.id);
    await waitFor(() => started.has(first.id), 'the first job to start');
    const second = await app.jobs.enqueue('answers.b');
    const before = await raw.findOne({ _id: new ObjectId(second.id) });
    const outcome = await answerOf(app, second.id, 1);
    expect({ outcome, maxActive }).toMatchObject({
      outcome: { kind: 'conflict', reason: 'busy', job: { id: second.id, status: 'pending' } },
      maxActive: 1,
    });
    expect(await raw.findOne({ _id: new ObjectId(second.id) })).toEqual(before);
    await firstRun;
    // Once the slot is free it runs (through runNow, or the poll loop).
    if (!worker) expect(await app.jobs.runNow(second.id)).toMatchObject({ kind: 'executed' });
    await waitFor(async () => (await app.jobs.findById(second.id))?.status === 'completed', 'the second job to run');
  });

  it('never runs more than concurrency jobs when runNow calls race the poll loop; each job runs once', async () => {
    const { app } = await start({ worker: true, concurrency: 2, pollIntervalMs: 5 });
    const jobs = await app.jobs.enqueueMany(
      Array.from({ length: 20 }, (_, index) => ({ name: `answers.quick-${index % 2 ? 'a' : 'b'}` })),
    );
    const answers = await Promise.all(jobs.map((job) => app.jobs.runNow(job.id)));
    await app.jobs.drain({ timeoutMs: 20_000 });
    expect(await app.jobs.stats()).toMatchObject({ completed: 20, pending: 0, running: 0 });
    const kinds = answers.map((answer) => (answer.kind === 'conflict' ? `conflict(${answer.reason})` : answer.kind));
    expect({ runs: ran.length, distinct: new Set(ran).size }).toEqual({ runs: 20, distinct: 20 });
    expect(maxActive).toBeLessThanOrEqual(2);
    // Run here, refused without a claim (busy), or the poll loop had it (locked, terminal); never past concurrency.
    const allowed = ['executed', 'conflict(busy)', 'conflict(locked)', 'conflict(terminal)'];
    expect(kinds.filter((kind) => !allowed.includes(kind))).toEqual([]);
    expect(kinds).toContain('conflict(busy)');
  });

  it('answers terminal, not_due and locked for a groupConcurrency name, as for any name', async () => {
    const { app } = await start({ worker: false });
    const done = await app.jobs.enqueue('answers.grouped', null, { group: 'g' });
    gate.resolve();
    expect(await app.jobs.runNow(done.id)).toMatchObject({ kind: 'executed', job: { status: 'completed' } });
    gate = deferred();
    const later = await app.jobs.enqueue('answers.grouped', null, { group: 'g', delayMs: 60_000 });
    const running = await app.jobs.enqueue('answers.grouped', null, { group: 'g' });
    const run = app.jobs.runNow(running.id);
    await waitFor(() => started.has(running.id), 'the running job to start');
    const answers = {
      terminal: await app.jobs.runNow(done.id),
      notDue: await app.jobs.runNow(later.id),
      locked: await app.jobs.runNow(running.id),
    };
    expect(answers).toMatchObject({
      terminal: { kind: 'conflict', reason: 'terminal' },
      notDue: { kind: 'conflict', reason: 'not_due' },
      locked: { kind: 'conflict', reason: 'locked' },
    });
    gate.resolve();
    expect(await run).toMatchObject({ kind: 'executed' });
  });

  it.each([
    ['globalConcurrency', 'answers.global'],
    ['groupConcurrency', 'answers.grouped'],
  ])('reclaims an expired running row that holds the only %s slot, counting the lost attempt', async (_limit, name) => {
    const { app, raw } = await start({ worker: false });
    const job = await app.jobs.enqueue(name, null, { group: 'g' });
    // As a worker that crashed mid-run leaves it: running, its lease run out, the only slot still its own.
    const slot =
      name === 'answers.global'
        ? { concurrencySlot: concurrencySlotKey(name, 0) }
        : { groupSlot: groupSlotKey(name, 'g', 0) };
    await raw.updateOne(
      { _id: new ObjectId(job.id) },
      {
        $set: {
          status: 'running',
          lockedBy: 'crashed-worker:1',
          lockedUntil: new Date(Date.now() - 1_000),
          startedAt: new Date(Date.now() - 60_000),
          fencingToken: 1,
          ...slot,
        },
      },
    );
    gate.resolve();
    const outcome = await app.jobs.runNow(job.id);
    expect(outcome.kind === 'conflict' ? `conflict(${outcome.reason})` : outcome.kind).toBe('executed');
    // As an unlimited name's reclaim (run-now.spec.ts): the lost attempt is counted, the handler runs attempt 2.
    expect(outcome).toMatchObject({
      kind: 'executed',
      job: { status: 'completed', attemptCount: 1, fencingToken: 2, attempts: [{ errorClass: 'LeaseExpired' }] },
    });
    expect(started.get(job.id)).toBe(2);
    const row = await raw.findOne({ _id: new ObjectId(job.id) });
    expect({ concurrencySlot: row?.concurrencySlot, groupSlot: row?.groupSlot }).toEqual({});
  });
});
