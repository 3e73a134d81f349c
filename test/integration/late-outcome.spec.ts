import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { type JobEvent, JobHandler } from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { sleep } from '../support/sleep';
import { uniqueDatabaseName } from '../support/test-database';

const LEASE_MS = 300;

@Injectable()
class QuickJobs {
  @JobHandler('quick')
  quick() {}
}

describe('an outcome write whose answer comes after the lease was lost', () => {
  let app: JobsTestApp;

  beforeAll(async () => {
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('late_outcome'),
      options: { leaseMs: LEASE_MS, heartbeatIntervalMs: 100, pollIntervalMs: 50 },
      providers: [QuickJobs],
    });
  });
  afterAll(() => app.close());

  it('reports the job completed once the write that landed answers, not as left to be reclaimed', async () => {
    const { lease: leases, outcome: outcomes } = app.stores;
    const { renewLease, renewLeases } = leases;
    const { complete } = outcomes;
    // Renewals hang, so the lease runs out locally; the completion lands at once but its answer arrives late.
    const hang = () => new Promise<never>(() => undefined);
    leases.renewLease = hang;
    leases.renewLeases = hang;
    outcomes.complete = async (...args) => {
      const landed = await complete.apply(outcomes, args);
      await sleep(LEASE_MS * 2);
      return landed;
    };
    const events: JobEvent[] = [];
    const subscription = app.jobs.events$.subscribe((event) => events.push(event));
    try {
      const job = await app.jobs.enqueue('quick');
      await waitFor(() => events.some((e) => e.jobId === job.id && e.type === 'completed'), 'completed event', 5_000);
      const mine = events.filter((e) => e.jobId === job.id).map((e) => e.type);
      expect(mine).toEqual(['enqueued', 'started', 'stale', 'completed']);
      expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'completed', attemptCount: 0 });
    } finally {
      subscription.unsubscribe();
      Object.assign(leases, { renewLease, renewLeases });
      Object.assign(outcomes, { complete });
    }
  });
});
