import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Injectable } from '@nestjs/common';
import {
  JobCancelledError,
  type JobExecutionContext,
  JobHandler,
  JobTimeoutError,
  UnknownJobError,
  UnrecoverableJobError,
} from '../../lib';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { sleep } from '../support/sleep';
import { uniqueDatabaseName } from '../support/test-database';

@Injectable()
class Greeter {
  greet(name: string) {
    return `hello ${name}`;
  }
}

const seen: {
  payload: unknown;
  ctx: Omit<JobExecutionContext, 'signal' | 'extendLockTime' | 'updateProgress' | 'log'>;
  greeting: string;
}[] = [];
const failures = new Map<string, number>();
const gate = deferred();
let cancelledReason: unknown;

@Injectable()
class EngineHandlers {
  constructor(private readonly greeter: Greeter) {}

  @JobHandler('greet')
  greet(payload: { who: string }, ctx: JobExecutionContext) {
    seen.push({
      payload,
      ctx: {
        jobId: ctx.jobId,
        name: ctx.name,
        attempt: ctx.attempt,
        lockId: ctx.lockId,
        fencingToken: ctx.fencingToken,
        leaseExpiresAt: ctx.leaseExpiresAt,
        isStale: ctx.isStale,
      },
      greeting: this.greeter.greet(payload.who),
    });
  }

  @JobHandler('always-fails', { maxAttempts: 3, backoff: { baseMs: 5, maxMs: 20 } })
  alwaysFails(_payload: unknown, ctx: JobExecutionContext) {
    failures.set(ctx.jobId, (failures.get(ctx.jobId) ?? 0) + 1);
    throw new Error(`failure ${ctx.attempt}`);
  }

  @JobHandler('throws-string', { maxAttempts: 1 })
  throwsString() {
    throw 'plain string';
  }

  @JobHandler('throws-undefined', { maxAttempts: 1 })
  throwsUndefined() {
    throw undefined;
  }

  @JobHandler('unrecoverable', { maxAttempts: 5 })
  unrecoverable() {
    throw new UnrecoverableJobError('bad input, do not retry');
  }

  /** Would run forever, but stops when its signal aborts (as handlers should): rejects with the reason. */
  @JobHandler('hangs', { timeoutMs: 100, maxAttempts: 1 })
  hangs(_payload: unknown, ctx: JobExecutionContext) {
    return new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
  }

  @JobHandler('waits-for-cancel')
  async waitsForCancel(_payload: unknown, ctx: JobExecutionContext) {
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
    cancelledReason = ctx.signal.reason;
  }

  @JobHandler('gated')
  async gated() {
    await gate.promise;
  }
}

describe('engine (one worker)', () => {
  let app: JobsTestApp;

  beforeAll(async () => {
    app = await createJobsTestApp({ dbName: uniqueDatabaseName('engine'), providers: [Greeter, EngineHandlers] });
  });

  afterAll(async () => {
    gate.resolve();
    await app.close();
  });

  const settled = (id: string, status: string) =>
    waitFor(async () => (await app.jobs.findById(id))?.status === status, `job ${id} to be ${status}`);

  it('runs a handler bound to its instance with (payload, ctx) and completes the job', async () => {
    const job = await app.jobs.enqueue('greet', { who: 'ada' });
    expect(job).toMatchObject({ name: 'greet', status: 'pending', attemptCount: 0, fencingToken: 0, priority: 0 });
    await settled(job.id, 'completed');
    const run = seen.find((entry) => entry.ctx.jobId === job.id);
    expect(run).toMatchObject({
      payload: { who: 'ada' },
      greeting: 'hello ada',
      ctx: { name: 'greet', attempt: 1, fencingToken: 1, isStale: false },
    });
    expect(run?.ctx.lockId).toMatch(/^.+:\d+:[0-9a-f]{6}#\d+$/);
    const done = await app.jobs.findById(job.id);
    expect(done).toMatchObject({
      status: 'completed',
      attemptCount: 0,
      lockedBy: null,
      lockedUntil: null,
      lastError: null,
    });
    expect(done?.finishedAt).toBeInstanceOf(Date);
  });

  it('retries with backoff and dead-letters after maxAttempts, one history entry per attempt', async () => {
    const job = await app.jobs.enqueue('always-fails', {});
    expect(job.maxAttempts).toBe(3);
    await settled(job.id, 'dead');
    const dead = await app.jobs.findById(job.id);
    expect(failures.get(job.id)).toBe(3);
    expect(dead?.attemptCount).toBe(3);
    expect(dead?.attempts.map((a) => [a.error, a.errorClass])).toEqual([
      ['failure 1', 'Error'],
      ['failure 2', 'Error'],
      ['failure 3', 'Error'],
    ]);
    expect(dead).toMatchObject({ lastError: 'failure 3', lockedBy: null });
  });

  it('records non-Error throws with a readable message', async () => {
    const a = await app.jobs.enqueue('throws-string');
    const b = await app.jobs.enqueue('throws-undefined');
    await settled(a.id, 'dead');
    await settled(b.id, 'dead');
    expect((await app.jobs.findById(a.id))?.attempts[0]).toMatchObject({
      error: 'plain string',
      errorClass: 'NonError',
    });
    expect((await app.jobs.findById(b.id))?.attempts[0]).toMatchObject({
      error: 'Handler threw undefined instead of an Error',
      errorClass: 'NonError',
    });
  });

  it('dead-letters an UnrecoverableJobError at once', async () => {
    const job = await app.jobs.enqueue('unrecoverable');
    await settled(job.id, 'dead');
    expect(await app.jobs.findById(job.id)).toMatchObject({ attemptCount: 1, lastError: 'bad input, do not retry' });
  });

  it('fails the attempt of a handler that stops at its timeoutMs', async () => {
    const job = await app.jobs.enqueue('hangs');
    await settled(job.id, 'dead');
    const attempt = (await app.jobs.findById(job.id))?.attempts[0];
    expect(attempt?.errorClass).toBe(JobTimeoutError.name);
    expect(attempt?.error).toContain('timeout of 100 ms');
  });

  it('cancels a running job and aborts its signal in this process', async () => {
    const job = await app.jobs.enqueue('waits-for-cancel');
    await settled(job.id, 'running');
    const cancelled = await app.jobs.cancel(job.id);
    expect(cancelled?.status).toBe('cancelled');
    await waitFor(() => cancelledReason !== undefined, 'the handler to see its abort');
    expect(cancelledReason).toBeInstanceOf(JobCancelledError);
    expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'cancelled', lockedBy: null, attemptCount: 0 });
  });

  it('cancels a pending job, and retry() brings a cancelled job back with attempts reset', async () => {
    const job = await app.jobs.enqueue('greet', { who: 'later' }, { delayMs: 60_000 });
    expect((await app.jobs.cancel(job.id))?.status).toBe('cancelled');
    const revived = await app.jobs.retry(job.id);
    expect(revived).toMatchObject({ status: 'pending', attemptCount: 0 });
    await settled(job.id, 'completed');
  });

  it('leaves a due job with no handler in this process pending and untouched, and keeps going', async () => {
    const orphan = await app.jobs.enqueue('nobody-handles-this', { x: 1 }, { strict: false, priority: 1 });
    const next = await app.jobs.enqueue('greet', { who: 'after orphan' });
    await settled(next.id, 'completed');
    expect(await app.jobs.findById(orphan.id)).toMatchObject({ status: 'pending', fencingToken: 0, lastError: null });
    await app.jobs.cancel(orphan.id);
  });

  it('rejects unknown names unless strict is false, storing nothing', async () => {
    const before = await app.jobs.stats();
    await expect(app.jobs.enqueue('no-such-job')).rejects.toBeInstanceOf(UnknownJobError);
    expect(await app.jobs.stats()).toEqual(before);
  });

  it('claims by priority, then runAt', async () => {
    const order: string[] = [];
    const low = await app.jobs.enqueue('gated', null, { priority: 0, delayMs: 0 });
    // Fill the remaining slots so the next three wait in the queue together.
    await settled(low.id, 'running');
    const blockers = await Promise.all([1, 2, 3].map(() => app.jobs.enqueue('gated', null, { priority: 100 })));
    await Promise.all(blockers.map((b) => settled(b.id, 'running')));
    const queued = [
      await app.jobs.enqueue('greet', { who: 'p1-early' }, { priority: 1, runAt: new Date(Date.now() - 2000) }),
      await app.jobs.enqueue('greet', { who: 'p5' }, { priority: 5 }),
      await app.jobs.enqueue('greet', { who: 'p1-late' }, { priority: 1, runAt: new Date(Date.now() - 1000) }),
    ];
    const start = seen.length;
    gate.resolve();
    await Promise.all(queued.map((job) => settled(job.id, 'completed')));
    order.push(...seen.slice(start).map((entry) => (entry.payload as { who: string }).who));
    expect(order).toEqual(['p5', 'p1-early', 'p1-late']);
  });

  it('reports counts per status', async () => {
    const stats = await app.jobs.stats();
    expect(Object.keys(stats).sort()).toEqual(['cancelled', 'completed', 'dead', 'failed', 'pending', 'running']);
    expect(stats.completed).toBeGreaterThan(0);
    expect(stats.dead).toBeGreaterThanOrEqual(5);
  });
});

@Controller('reports')
class ReportsController {
  static runs = 0;

  @JobHandler('controller-job')
  run() {
    ReportsController.runs += 1;
  }
}

describe('engine wiring', () => {
  it('runs handlers declared on controllers, and a local enqueue wakes an idle loop at once', async () => {
    // A one-minute poll interval: only the enqueue's wake-up can start this job within the wait below.
    const app = await createJobsTestApp({
      dbName: uniqueDatabaseName('wiring'),
      options: { pollIntervalMs: 60_000 },
      controllers: [ReportsController],
    });
    try {
      await sleep(100); // the loop has polled once and sleeps
      const job = await app.jobs.enqueue('controller-job');
      await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'completion', 5_000);
      expect(ReportsController.runs).toBe(1);
    } finally {
      await app.close();
    }
  });
});
