import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { Subscription } from 'rxjs';
import { type JobEvent, type JobExecutionContext, JobHandler } from '../../lib';
import { ErrorReplyProxy, isStatusUpdate } from '../support/error-reply-proxy';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** Resolved when the second attempt's handler runs: the failure write's answer is held until then. */
const secondAttemptRuns = deferred();

@Injectable()
class Handlers {
  /** Fails its first attempt and succeeds on the next, retried after ~10 ms. */
  @JobHandler('fails-once', { backoff: { baseMs: 10, maxMs: 10 } })
  failsOnce(_payload: unknown, ctx: JobExecutionContext) {
    if (ctx.attempt === 1) throw new Error('first attempt fails');
    secondAttemptRuns.resolve();
    return 'ok';
  }
}

describe("one job's events stay in lifecycle order when its failure write is answered late", () => {
  let proxy: ErrorReplyProxy;
  let app: JobsTestApp;
  const events: JobEvent[] = [];
  let subscription: Subscription;

  beforeAll(async () => {
    proxy = await ErrorReplyProxy.start(testMongoUri());
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('event-order-slow-write'),
      uri: proxy.uri,
      // A free slot while attempt 1 awaits its write's answer: the retry can be claimed here meanwhile.
      options: { pollIntervalMs: 20, concurrency: 4 },
      providers: [Handlers],
    });
    subscription = app.jobs.events$.subscribe((event) => events.push(event));
  });
  afterAll(async () => {
    subscription?.unsubscribe();
    await app?.close();
    await proxy?.close();
  });

  it('emits retrying before the next attempt starts, though that start came first', async () => {
    // The failure write (back to pending, owner-fenced) lands at once; the driver hears of it only once the retry,
    // claimed on another pooled connection, has started running.
    const held = proxy.delayReply({
      match: (command) => isStatusUpdate(command, 'jobs', 'pending'),
      until: secondAttemptRuns.promise,
    });
    const { id } = await app.jobs.enqueue('fails-once', {});
    await waitFor(() => events.some((e) => e.jobId === id && e.type === 'completed'), 'the job to complete');

    expect(held.hits).toBe(1);
    const lifecycle = events.filter((e) => e.jobId === id && e.type !== 'renewed' && e.type !== 'progress');
    expect(lifecycle.map((e) => `${e.type}#${e.attempt}`)).toEqual([
      'enqueued#0',
      'started#1',
      'retrying#1',
      'started#2',
      'completed#2',
    ]);
    // The race really happened: attempt 2 started (its event was built) before attempt 1's failure was known here.
    const retrying = lifecycle[2];
    const secondStart = lifecycle[3];
    expect(secondStart.at.getTime()).toBeLessThanOrEqual(retrying.at.getTime());
  });
});
