import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { DrainTimeoutError, type JobExecutionContext, JobHandler } from '../../lib';
import { JobClaimService } from '../../lib/claim/job-claim.service';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

/** Jobs of `run-here.limited` wait on this until the test lets them go. */
let gate = deferred();
const started: string[] = [];

@Injectable()
class LimitedHandler {
  /** One at a time in the fleet: its first job holds the only slot while the second is pending. */
  @JobHandler('run-here.limited', { globalConcurrency: 1 })
  async limited(_payload: unknown, ctx: JobExecutionContext): Promise<void> {
    started.push(ctx.jobId);
    await gate.promise;
  }
}

@Injectable()
class PlainHandler {
  @JobHandler('run-here.plain')
  plain(): void {}
}

const LIMITED = 'run-here.limited';

/**
 * A limited name at its limit is skipped by the claims until the next poll: that must not hide it from the names this
 * process runs (drain's default, the fleet view's `names`).
 */
describe('names run here while a limited name is at its limit', () => {
  const apps: JobsTestApp[] = [];

  afterEach(async () => {
    gate.resolve();
    await Promise.all(apps.splice(0).map((app) => app.close()));
    gate = deferred();
    started.length = 0;
  });

  /** One job of the limited name running (holding the only slot), one pending, and the claims skipping the name. */
  async function atItsLimit(providers: (typeof LimitedHandler | typeof PlainHandler)[]) {
    const app = await createJobsTestApp({
      dbName: uniqueDatabaseName('run_here'),
      // A long interval: the claims skip the full name for 2 s after each claim that found it full.
      options: { pollIntervalMs: 2_000 },
      providers,
    });
    apps.push(app);
    const first = await app.jobs.enqueue(LIMITED);
    await waitFor(() => started.length === 1, 'the first limited job to start');
    const second = await app.jobs.enqueue(LIMITED);
    const claims = app.get(JobClaimService);
    await waitFor(() => !claims.claimableNames([]).includes(LIMITED), 'a claim to find the limited name full');
    return { app, first, second, fullSince: new Date() };
  }

  it('drain() without names waits for a limited name at its limit (its only name)', async () => {
    const { app, first, second } = await atItsLimit([LimitedHandler]);
    const error = await app.jobs.drain({ timeoutMs: 300 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(DrainTimeoutError);
    expect((error as DrainTimeoutError).left).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: LIMITED, status: 'running', count: 1 }),
        expect.objectContaining({ name: LIMITED, status: 'pending', count: 1 }),
      ]),
    );
    gate.resolve();
    await app.jobs.drain({ timeoutMs: 10_000 });
    expect((await app.jobs.findById(first.id))?.status).toBe('completed');
    expect((await app.jobs.findById(second.id))?.status).toBe('completed');
  });

  it('drain() without names waits for a limited name at its limit beside an unlimited name', async () => {
    const { app, second } = await atItsLimit([LimitedHandler, PlainHandler]);
    const error = await app.jobs.drain({ timeoutMs: 300 }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(DrainTimeoutError);
    gate.resolve();
    await app.jobs.drain({ timeoutMs: 10_000 });
    expect((await app.jobs.findById(second.id))?.status).toBe('completed');
  });

  it('lists a limited name at its limit among the names of the worker in the fleet view', async () => {
    const { app, fullSince } = await atItsLimit([LimitedHandler]);
    // A presence refresh written while the claims skip the name (refreshed every 2 s here).
    await waitFor(
      async () => (await app.jobs.workers()).some((worker) => worker.lastSeenAt > fullSince),
      'a presence refresh after the name was found full',
    );
    const [worker] = (await app.jobs.workers()).filter((w) => w.lastSeenAt > fullSince);
    expect(worker.names).toEqual([LIMITED]);
  });
});
