import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { JobClaimService } from '../../lib/claim/job-claim.service';
import { LimitedClaim } from '../../lib/claim/limited-claim';
import { ShutdownDeadline } from '../../lib/model/shutdown-deadline';
import { createJobsTestApp, type JobsTestApp } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

@Injectable()
class Handlers {
  @JobHandler('solo', { globalConcurrency: 1 })
  solo(_payload: unknown, _ctx: JobExecutionContext) {}

  @JobHandler('free')
  free(_payload: unknown, _ctx: JobExecutionContext) {}
}

/**
 * A claim step beside limited names sends one command per limited name, then one for the others. The generative
 * checker (long seed 3602) caught a worker whose step went on claiming after SIGTERM: the claim landed a second into
 * shutdown, its answer came after its lease, another worker reclaimed the row and charged an attempt that no handler
 * ran. Once shutdown has begun, a step sends nothing more.
 */
describe('claims at shutdown', () => {
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });

  it('sends no further claim command once shutdown began: a step that asked a limited name first asks nothing more', async () => {
    const app = await createJobsTestApp({
      dbName: uniqueDatabaseName('claims_at_shutdown'),
      options: { worker: false },
      providers: [Handlers],
    });
    apps.push(app);
    const claims = app.get(JobClaimService);
    const deadline = app.get(ShutdownDeadline);
    // Which name each step asks for, in order; once armed, shutdown begins when the limited name's claim returns.
    const asked: string[] = [];
    let armed = false;
    const limited = app.get(LimitedClaim);
    const take = limited.take.bind(limited);
    limited.take = async (request) => {
      asked.push('solo');
      const result = await take(request);
      if (armed) deadline.start();
      return result;
    };
    const pendingTake = app.stores.claim.take.bind(app.stores.claim);
    app.stores.claim.take = (source, now, lockId, lockedUntil, scope, slots) => {
      // The limited name's claim takes its row through this store too: only the other names' takes are recorded.
      if (!scope.names.includes('solo')) asked.push(deadline.started ? 'free after shutdown began' : 'free');
      return pendingTake(source, now, lockId, lockedUntil, scope, slots);
    };
    // The order rotates per step: step until the last one asked the unlimited names first, so the next asks 'solo' first.
    for (let i = 0; i < 2 && asked[0] !== 'free'; i += 1) {
      asked.length = 0;
      expect(await claims.claimNext()).toBeNull();
    }
    expect(asked[0]).toBe('free');
    const job = await app.jobs.enqueue('free', {});
    armed = true;
    asked.length = 0;

    expect(await claims.claimNext()).toBeNull();

    expect(asked).toEqual(['solo']);
    expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'pending', attemptCount: 0 });
  });
});
