import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Types } from 'mongoose';
import { type JobExecutionContext, JobHandler, LeaseLostError } from '../../lib';
import { EventLoopStalls } from '../support/event-loop-stalls';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { notReached, reached, untilPreconditionReached } from '../support/precondition';
import { sleep } from '../support/sleep';
import { uniqueDatabaseName } from '../support/test-database';

const calls: { jobId: string; worker: string; fencingToken: number; start: number; end?: number }[] = [];
let lostSignal: { reason: unknown; at: number; wasStale: boolean } | undefined;
let extendCount = 0;

@Injectable()
class LeaseHandlers {
  /** Runs for `ms`, well past the lease, relying on the automatic heartbeat only. */
  @JobHandler('long')
  async long(payload: { ms: number }, ctx: JobExecutionContext) {
    const call: (typeof calls)[number] = {
      jobId: ctx.jobId,
      worker: ctx.lockId.split('#')[0],
      fencingToken: ctx.fencingToken,
      start: Date.now(),
    };
    calls.push(call);
    await sleep(payload.ms);
    call.end = Date.now();
  }

  /** Waits for its signal (or 10 s), recording when and why it was aborted. */
  @JobHandler('until-aborted')
  async untilAborted(_payload: unknown, ctx: JobExecutionContext) {
    calls.push({ jobId: ctx.jobId, worker: ctx.lockId, fencingToken: ctx.fencingToken, start: Date.now() });
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 10_000);
      ctx.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        lostSignal = { reason: ctx.signal.reason, at: Date.now(), wasStale: ctx.isStale };
        resolve();
      });
    });
  }

  /** Ignores its signal entirely and returns late. */
  @JobHandler('deaf')
  async deaf(payload: { ms: number }, ctx: JobExecutionContext) {
    const call: (typeof calls)[number] = {
      jobId: ctx.jobId,
      worker: ctx.lockId,
      fencingToken: ctx.fencingToken,
      start: Date.now(),
    };
    calls.push(call);
    await sleep(payload.ms);
    call.end = Date.now();
  }

  /** Declares a longer lease than the module's. */
  @JobHandler('long-lease', { leaseMs: 5_000 })
  async longLease(_payload: unknown, ctx: JobExecutionContext) {
    calls.push({ jobId: ctx.jobId, worker: ctx.lockId, fencingToken: ctx.fencingToken, start: Date.now() });
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
  }

  /** Bursts of extendLockTime while working. */
  @JobHandler('extends')
  async extends(_payload: unknown, ctx: JobExecutionContext) {
    const before = ctx.leaseExpiresAt.getTime();
    await Promise.all(Array.from({ length: 50 }, (_, i) => ctx.extendLockTime(1000 + i)));
    extendCount += 50;
    if (ctx.leaseExpiresAt.getTime() <= before) throw new Error('extendLockTime did not move the deadline');
  }
}

describe('lease heartbeat against the database', () => {
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    calls.length = 0;
    lostSignal = undefined;
  });

  const start = async (dbName: string, workerId: string, options = {}) => {
    const app = await createJobsTestApp({
      dbName,
      options: { workerId, pollIntervalMs: 20, ...options },
      providers: [LeaseHandlers],
    });
    apps.push(app);
    return app;
  };

  /**
   * Runs a scenario whose workers must keep their lease by heartbeat alone. A run that failed while this process's event
   * loop stalled past a third of the lease (the heartbeat interval) did not keep its workers live: it is run again,
   * from scratch; a failure without such a stall fails the test.
   */
  const withLiveWorkers = (leaseMs: number, scenario: (attempt: number) => Promise<void>) =>
    untilPreconditionReached(`no event-loop stall past ${Math.round(leaseMs / 3)} ms`, async (attempt) => {
      const stalls = new EventLoopStalls();
      const outcome = await scenario(attempt).then(
        () => undefined,
        (error: unknown) => error,
      );
      const stalledMs = stalls.stop();
      if (outcome === undefined) return reached();
      if (stalledMs <= leaseMs / 3) throw outcome;
      await Promise.all(apps.splice(0).map((app) => app.close()));
      calls.length = 0;
      return notReached(
        `the event loop stalled ${stalledMs} ms; the run failed with: ${String(outcome).split('\n')[0]}`,
      );
    });

  it('keeps a job running for 3 × lease on one worker while another polls: never claimed twice', async () => {
    await withLiveWorkers(500, async (attempt) => {
      const dbName = uniqueDatabaseName(`hb_long${attempt}`);
      const a = await start(dbName, 'a', { leaseMs: 500 });
      const job = await a.jobs.enqueue('long', { ms: 1500 });
      await waitFor(() => calls.length === 1, 'the handler to start');
      await start(dbName, 'b', { leaseMs: 500 });
      await waitFor(async () => (await a.jobs.findById(job.id))?.status === 'completed', 'completion');
      expect(calls).toHaveLength(1);
      expect(await a.jobs.findById(job.id)).toMatchObject({ status: 'completed', attemptCount: 0, fencingToken: 1 });
    });
  });

  it('two workers, lease 150 ms, handler 600 ms: one handler call', async () => {
    await withLiveWorkers(150, async (attempt) => {
      const dbName = uniqueDatabaseName(`hb_two${attempt}`);
      const [a, b] = [await start(dbName, 'a', { leaseMs: 150 }), await start(dbName, 'b', { leaseMs: 150 })];
      const job = await b.jobs.enqueue('long', { ms: 600 });
      await waitFor(async () => (await a.jobs.findById(job.id))?.status === 'completed', 'completion');
      expect(calls).toHaveLength(1);
      expect(await a.jobs.findById(job.id)).toMatchObject({ attemptCount: 0 });
    });
  });

  it('aborts the signal within one heartbeat interval when another owner takes the row, and writes nothing', async () => {
    const app = await start(uniqueDatabaseName('hb_takeover'), 'a', { leaseMs: 600 }); // heartbeat every 200 ms
    const job = await app.jobs.enqueue('until-aborted');
    await waitFor(() => calls.length === 1, 'the handler to start');
    const takenAt = Date.now();
    const thief = { lockedBy: 'thief#1.x', lockedUntil: new Date(Date.now() + 60_000), fencingToken: 2 };
    await app.connection.collection('jobs').updateOne({ _id: new Types.ObjectId(job.id) }, { $set: thief });
    await waitFor(() => lostSignal !== undefined, 'the abort', 2_000);
    expect(lostSignal?.reason).toBeInstanceOf(LeaseLostError);
    expect((lostSignal?.reason as LeaseLostError | undefined)?.reason).toBe('taken-over');
    expect(lostSignal?.wasStale).toBe(true);
    expect((lostSignal?.at ?? Number.POSITIVE_INFINITY) - takenAt).toBeLessThan(200 + 150);
    await sleep(100); // give a (wrong) finalize the chance to land
    expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'running', ...thief, attemptCount: 0 });
  });

  it('frees the slot at once when the lease is lost, even if the handler ignores its signal, and ignores its late return', async () => {
    const app = await start(uniqueDatabaseName('hb_deaf'), 'a', { leaseMs: 600, concurrency: 1 });
    const deaf = await app.jobs.enqueue('deaf', { ms: 1500 });
    await waitFor(() => calls.length === 1, 'the deaf handler to start');
    const thief = { lockedBy: 'thief#1.x', lockedUntil: new Date(Date.now() + 60_000) };
    await app.connection.collection('jobs').updateOne({ _id: new Types.ObjectId(deaf.id) }, { $set: thief });
    // With one slot, this job can only run once the deaf execution's slot is freed.
    const next = await app.jobs.enqueue('long', { ms: 0 });
    await waitFor(async () => (await app.jobs.findById(next.id))?.status === 'completed', 'the next job', 2_000);
    expect(calls[0].end).toBeUndefined(); // the deaf handler is still sleeping
    await waitFor(() => calls[0].end !== undefined, 'the deaf handler to return', 3_000);
    await sleep(50);
    expect(await app.jobs.findById(deaf.id)).toMatchObject({ status: 'running', ...thief });
  });

  it("takes a handler's longer leaseMs straight after the claim", async () => {
    const app = await start(uniqueDatabaseName('hb_handler_lease'), 'a', { leaseMs: 500 });
    const job = await app.jobs.enqueue('long-lease');
    await waitFor(() => calls.length === 1, 'the handler to start');
    await waitFor(
      async () => ((await app.jobs.findById(job.id))?.lockedUntil?.getTime() ?? 0) >= calls[0].start + 4_500,
      'the lease to reach the handler lease',
      2_000,
    );
    await app.jobs.cancel(job.id);
  });

  it('does not call the handler when the claim came back after its own lease deadline', async () => {
    const app = await start(uniqueDatabaseName('hb_late_claim'), 'a', { leaseMs: 150 });
    const take = app.stores.claim.take.bind(app.stores.claim);
    let slowAnswers = 1;
    app.stores.claim.take = async (source, ...args) => {
      const row = await take(source, ...args);
      if (source === 'pending' && row && slowAnswers-- > 0) await sleep(300); // the claim's answer arrives after lockedUntil
      return row;
    };
    const job = await app.jobs.enqueue('long', { ms: 0 });
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'completion by a later claim');
    // Only the second claim's handler ran; the first, late, claim ran nothing and handed the row back (it was still
    // under its lock), so no attempt was counted (before: reclaimed after its lease with a LeaseExpired attempt).
    expect(calls.map((c) => c.fencingToken)).toEqual([2]);
    expect((await app.jobs.findById(job.id))?.attempts).toEqual([]);
  });

  it('coalesces a burst of extendLockTime calls and moves the deadline', async () => {
    const app = await start(uniqueDatabaseName('hb_extend'), 'a', { leaseMs: 500 }); // extensions of ~1 s move the deadline
    const renew = app.stores.lease.renewLease.bind(app.stores.lease);
    let writes = 0;
    let inFlight = 0;
    let maxInFlight = 0;
    app.stores.lease.renewLease = async (...args) => {
      writes += 1;
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        return await renew(...args);
      } finally {
        inFlight -= 1;
      }
    };
    const job = await app.jobs.enqueue('extends');
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'completion');
    expect(extendCount).toBe(50);
    expect(writes).toBeGreaterThanOrEqual(1);
    expect(writes).toBeLessThanOrEqual(2);
    expect(maxInFlight).toBe(1);
  });

  it('leaves no timers behind after 1,000 executions', async () => {
    // A long poll interval: between bursts the loop sleeps in one timer, at both measurements.
    const app = await start(uniqueDatabaseName('hb_handles'), 'a', {
      concurrency: 16,
      leaseMs: 5_000,
      pollIntervalMs: 60_000,
    });
    const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    // Driver monitors come and go; sample a few times so one in-between moment cannot decide the result.
    const samples = async () => {
      const counts: number[] = [];
      for (let i = 0; i < 5; i += 1) {
        counts.push(timers());
        await sleep(20);
      }
      return counts;
    };
    await app.jobs.enqueue('long', { ms: 0 });
    await waitFor(async () => (await app.jobs.stats()).completed === 1, 'warm-up');
    const baseline = Math.max(...(await samples()));
    await app.jobs.enqueueMany(Array.from({ length: 1000 }, () => ({ name: 'long', payload: { ms: 0 } })));
    await waitFor(async () => (await app.jobs.stats()).completed === 1001, '1,000 completions', 30_000);
    // A leak of one timer per execution would leave ~1,000 (a heartbeat and a watchdog each would be 2,000), for at
    // least the 5 s lease. Waited for, up to 1 s: beside two busy loops one timer more than the baseline was seen for
    // a moment (6 against 5), a transient timer, not a leak.
    const deadline = Date.now() + 1_000;
    let after = Math.min(...(await samples()));
    while (after > baseline && Date.now() < deadline) after = Math.min(...(await samples()));
    expect(after).toBeLessThanOrEqual(baseline);
  });
});
