import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { JobHandler } from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

let ran = 0;

@Injectable()
class ResilienceHandlers {
  @JobHandler('tick')
  tick() {
    ran += 1;
  }
}

describe('poll loop under injected database errors', () => {
  let app: JobsTestApp;

  beforeAll(async () => {
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('resilience'),
      options: { pollIntervalMs: 20, leaseMs: 300 },
      providers: [ResilienceHandlers],
    });
  });
  afterAll(() => app.close());

  const completed = (id: string) =>
    waitFor(async () => (await app.jobs.findById(id))?.status === 'completed', `job ${id} completed`);

  it('keeps polling after claim errors', async () => {
    const take = app.stores.claim.take.bind(app.stores.claim);
    const failures = [new Error('injected claim failure'), new Error('again')];
    let claims = 0;
    const spy = jest.spyOn(app.stores.claim, 'take').mockImplementation((source, ...args) => {
      if (source !== 'pending') return take(source, ...args);
      claims += 1;
      const failure = failures.shift();
      return failure ? Promise.reject(failure) : take(source, ...args);
    });
    const job = await app.jobs.enqueue('tick');
    await completed(job.id);
    expect(claims).toBeGreaterThanOrEqual(3);
    spy.mockRestore();
  });

  it('retries a finalize write that failed once: the job completes without a lost attempt', async () => {
    const complete = jest.spyOn(app.stores.outcome, 'complete');
    complete.mockRejectedValueOnce(new Error('injected transient finalize failure'));
    const before = ran;
    const job = await app.jobs.enqueue('tick');
    await completed(job.id);
    expect(await app.jobs.findById(job.id)).toMatchObject({ attemptCount: 0, attempts: [] });
    expect(ran - before).toBe(1);
    expect(complete).toHaveBeenCalledTimes(2);
    complete.mockRestore();
  });

  it('keeps running after a finalize that keeps failing; the unfinalized job is reclaimed when its lease runs out', async () => {
    const realComplete = app.stores.outcome.complete.bind(app.stores.outcome);
    // Every completion write of the first job's first execution fails, retries included.
    let firstId: string | undefined;
    let doomedLock: string | undefined;
    const complete = jest.spyOn(app.stores.outcome, 'complete').mockImplementation(async (id, lockId, at) => {
      if (id.toHexString() === firstId) {
        doomedLock ??= lockId;
        if (lockId === doomedLock) throw new Error('injected finalize failure');
      }
      return realComplete(id, lockId, at);
    });
    const before = ran;
    const first = await app.jobs.enqueue('tick', null, { delayMs: 30 });
    firstId = first.id;
    const second = await app.jobs.enqueue('tick', null, { delayMs: 60 });
    await completed(second.id);
    // The first job's completion was lost with the error; its lease (300 ms) expires and it is reclaimed.
    await completed(first.id);
    const row = await app.jobs.findById(first.id);
    expect(row?.attempts.map((a) => a.errorClass)).toEqual(['LeaseExpired']);
    expect(ran - before).toBe(3);
    // The first execution retried its completion (an error of unknown kind) for one lease, then gave up.
    const doomedCalls = () => complete.mock.calls.filter(([, lockId]) => lockId === doomedLock).length;
    expect(doomedCalls()).toBeGreaterThanOrEqual(2);
    complete.mockRestore();
  });
});
