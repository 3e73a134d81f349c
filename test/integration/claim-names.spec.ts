import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { InvalidOptionError, type JobExecutionContext, JobHandler, type JobsModuleOptions } from '../../lib';
import { JobClaimService } from '../../lib/claim/job-claim.service';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

const runs: { name: string; worker: string }[] = [];
const record = (ctx: JobExecutionContext) => runs.push({ name: ctx.name, worker: ctx.lockId.split('#')[0] });

@Injectable()
class ServiceAHandlers {
  @JobHandler('a')
  a(_payload: unknown, ctx: JobExecutionContext) {
    record(ctx);
  }
}

@Injectable()
class ServiceBHandlers {
  @JobHandler('b')
  b(_payload: unknown, ctx: JobExecutionContext) {
    record(ctx);
  }
}

/** One codebase with a light and a heavy job, deployed twice with different `runOnly`. */
@Injectable()
class PoolHandlers {
  @JobHandler('light')
  light(_payload: unknown, ctx: JobExecutionContext) {
    record(ctx);
  }

  @JobHandler('heavy')
  heavy(_payload: unknown, ctx: JobExecutionContext) {
    record(ctx);
  }
}

describe('claims are limited to the names this process runs', () => {
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    runs.length = 0;
  });

  const start = async (
    dbName: string,
    providers: (new (...args: never[]) => unknown)[],
    options: JobsModuleOptions,
  ) => {
    const app = await createJobsTestApp({ dbName, options: { pollIntervalMs: 20, ...options }, providers });
    apps.push(app);
    return app;
  };

  it('two services on one collection each run only their own jobs; none is failed', async () => {
    const dbName = uniqueDatabaseName('fleet');
    const a = await start(dbName, [ServiceAHandlers], { workerId: 'service-a' });
    await start(dbName, [ServiceBHandlers], { workerId: 'service-b' });
    await a.jobs.enqueueMany(
      Array.from({ length: 40 }, (_, i) => ({ name: i % 2 ? 'a' : 'b', options: { strict: false } })),
    );
    await waitFor(async () => {
      const stats = await a.jobs.stats();
      return stats.pending + stats.running === 0;
    }, 'every job to leave pending/running');
    expect(await a.jobs.stats()).toMatchObject({ completed: 40, failed: 0 });
    expect(runs.filter((run) => run.name === 'a').every((run) => run.worker === 'service-a')).toBe(true);
    expect(runs.filter((run) => run.name === 'b').every((run) => run.worker === 'service-b')).toBe(true);
  });

  it("leaves a job no process handles pending and untouched, then another service's worker runs it", async () => {
    const dbName = uniqueDatabaseName('unhandled');
    const a = await start(dbName, [ServiceAHandlers], { workerId: 'service-a' });
    const foreign = await a.jobs.enqueue('b', { for: 'service b' }, { strict: false, priority: 5 });
    // A later, lower-priority job of A's completes only after A's loop has passed over the foreign one.
    const own = await a.jobs.enqueue('a');
    await waitFor(async () => (await a.jobs.findById(own.id))?.status === 'completed', 'the own job');
    expect(await a.jobs.findById(foreign.id)).toMatchObject({
      status: 'pending',
      fencingToken: 0,
      attemptCount: 0,
      lockedBy: null,
      lastError: null,
      startedAt: null,
    });
    await start(dbName, [ServiceBHandlers], { workerId: 'service-b' });
    await waitFor(async () => (await a.jobs.findById(foreign.id))?.status === 'completed', 'the foreign job');
    expect(runs).toEqual([
      { name: 'a', worker: 'service-a' },
      { name: 'b', worker: 'service-b' },
    ]);
  });

  it("does not reclaim another service's expired lease", async () => {
    const a = await start(uniqueDatabaseName('foreign_reclaim'), [ServiceAHandlers], { worker: false });
    const foreign = await a.jobs.enqueue('b', {}, { strict: false });
    const expired = { status: 'running', lockedBy: 'service-b:1#1', lockedUntil: new Date(Date.now() - 1000) };
    await a.connection.collection('jobs').updateOne({ name: 'b' }, { $set: expired });
    expect(await a.get(JobClaimService).claimNext()).toBeNull();
    expect(await a.jobs.findById(foreign.id)).toMatchObject({ ...expired, attemptCount: 0, attempts: [] });
  });

  it('makes no query when no name is runnable: no handlers, or every handled name at its limit', async () => {
    const dbName = uniqueDatabaseName('nothing_runnable');
    const bare = await start(dbName, [], { worker: false });
    const a = await start(dbName, [ServiceAHandlers], { worker: false });
    await a.jobs.enqueue('a');
    for (const [app, excluded] of [
      [bare, []],
      [a, ['a']],
    ] as const) {
      const take = jest.spyOn(app.stores.claim, 'take');
      expect(await app.get(JobClaimService).claimNext([...excluded])).toBeNull();
      expect(take).not.toHaveBeenCalled();
    }
    expect(await a.jobs.stats()).toMatchObject({ pending: 1, running: 0 });
  });

  it('runOnly splits one codebase into two worker pools', async () => {
    const dbName = uniqueDatabaseName('pools');
    const light = await start(dbName, [PoolHandlers], { workerId: 'light-pool', runOnly: ['light'] });
    await start(dbName, [PoolHandlers], { workerId: 'heavy-pool', runOnly: ['heavy'] });
    await light.jobs.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ name: i % 2 ? 'light' : 'heavy' })));
    await waitFor(async () => (await light.jobs.stats()).completed === 20, '20 completed jobs');
    expect(runs).toHaveLength(20);
    expect(runs.every((run) => run.worker === `${run.name}-pool`)).toBe(true);
  });

  it("runNow runs a name this process's runOnly excludes (runOnly only scopes the poll loop)", async () => {
    const light = await start(uniqueDatabaseName('run_now_run_only'), [PoolHandlers], {
      workerId: 'light-only',
      runOnly: ['light'],
    });
    const heavy = await light.jobs.enqueue('heavy');
    const outcome = await light.jobs.runNow(heavy.id);
    expect(outcome).toMatchObject({ kind: 'executed', job: { status: 'completed' } });
    expect(runs).toEqual([{ name: 'heavy', worker: 'light-only' }]);
  });

  it('fails bootstrap when runOnly names a job with no handler in this process', async () => {
    const error = await start(uniqueDatabaseName('run_only_bad'), [PoolHandlers], {
      runOnly: ['light', 'heavvy'],
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as InvalidOptionError).option).toBe('runOnly');
    expect((error as Error).message).toContain('"heavvy"');
  });
});
