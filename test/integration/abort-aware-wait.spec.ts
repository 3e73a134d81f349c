import { getEventListeners, getMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

const WAITS = 50;

/**
 * What each handler saw of `ctx.signal`'s abort listeners: the most at once during its waits, Node's limit for the
 * signal (it warns `MaxListenersExceededWarning` when a wait takes the count past it), and the count after the waits.
 */
const listeners = new Map<string, { peak: number; limit: number; after: number }>();

/** The wait docs/handlers.md and the sample show: the timer's listener is removed when the timer fires. */
const abortAwareWait = (ms: number, signal: AbortSignal) => sleep(ms, undefined, { signal });

/** The hand-made wait it replaces: one listener added per wait, never removed. */
const leakyWait = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });

@Injectable()
class WaitingHandlers {
  @JobHandler('wait.abort-aware', { maxAttempts: 1 })
  async abortAware(_payload: unknown, ctx: JobExecutionContext) {
    await this.waitMany(ctx, abortAwareWait);
  }

  @JobHandler('wait.leaky', { maxAttempts: 1 })
  async leaky(_payload: unknown, ctx: JobExecutionContext) {
    await this.waitMany(ctx, leakyWait);
  }

  /** Waits longer than its timeout: the wait rejects with an AbortError, which must count as the abort. */
  @JobHandler('wait.timed-out', { maxAttempts: 1, timeoutMs: 100 })
  async timedOut(_payload: unknown, ctx: JobExecutionContext) {
    await abortAwareWait(60_000, ctx.signal);
  }

  private async waitMany(ctx: JobExecutionContext, wait: (ms: number, signal: AbortSignal) => Promise<unknown>) {
    let peak = 0;
    for (let i = 0; i < WAITS; i += 1) {
      const waiting = wait(1, ctx.signal);
      peak = Math.max(peak, getEventListeners(ctx.signal, 'abort').length);
      await waiting;
    }
    const after = getEventListeners(ctx.signal, 'abort').length;
    listeners.set(ctx.jobId, { peak, limit: getMaxListeners(ctx.signal), after });
  }
}

/**
 * A slow handler that waits on `ctx.signal` many times in one attempt must not pile up abort listeners: once a wait
 * takes their count past the signal's limit (10), Node warns `MaxListenersExceededWarning: Possible EventTarget memory
 * leak detected`. The library adds none of its own to the signal; the wait the docs show (`timers/promises` with
 * `{ signal: ctx.signal }`) removes its listener when its timer fires. Jest's sandboxed `process` does not receive
 * the real process's warnings, so the test checks the warning's condition itself: the count against
 * `getMaxListeners(signal)`. The leaky hand-made wait shows that these instruments see a leak when there is one.
 */
describe('waiting on ctx.signal many times in one attempt', () => {
  let app: JobsTestApp;

  beforeAll(async () => {
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('abort_aware_wait'),
      options: { pollIntervalMs: 20 },
      providers: [WaitingHandlers],
    });
  });
  afterAll(() => app.close());

  async function runToTheEnd(name: string) {
    const job = await app.jobs.enqueue(name);
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', `${name} completed`);
    return listeners.get(job.id);
  }

  it(`keeps one listener at a time on ctx.signal over ${WAITS} timers/promises waits, and none after`, async () => {
    // One at a time is below Node's limit of 10: no MaxListenersExceededWarning.
    expect(await runToTheEnd('wait.abort-aware')).toEqual({ peak: 1, limit: 10, after: 0 });
  });

  it("ends a wait cut short by the timeout as the timeout, not as the wait's AbortError", async () => {
    // Node's AbortError comes from the main realm, and this handler runs in Jest's VM context, where `instanceof
    // Error` is false for it: the library tells the abort by its name.
    const job = await app.jobs.enqueue('wait.timed-out');
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'dead', 'wait.timed-out dead');
    const [attempt] = (await app.jobs.findById(job.id))?.attempts ?? [];
    expect(attempt).toMatchObject({ errorClass: 'JobTimeoutError' });
  });

  it('sees the leak of a wait that never removes its listener: one more per wait, past the limit', async () => {
    expect(await runToTheEnd('wait.leaky')).toEqual({ peak: WAITS, limit: 10, after: WAITS });
  });
});
