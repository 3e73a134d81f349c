import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { JobHandler } from '../../lib';
import { JobChangeFeed } from '../../lib/worker/job-change-feed';
import { JobRunner } from '../../lib/worker/job-runner.service';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { detectTransactionSupport } from '../support/server-capabilities';
import { uniqueDatabaseName } from '../support/test-database';

const starts = new Map<string, number>();

@Injectable()
class ReplsetHandlers {
  @JobHandler('replset.streamed')
  run(payload: { tag: string }) {
    starts.set(payload.tag, Date.now());
  }
}

/** Longer than any wait below: only the stream (or the timer it feeds) can start a job in time. */
const SAFETY_NET_MS = 60_000;

/**
 * The change stream on a real server that has them (a replica-set member or a router, from its hello, as for
 * transactions), e.g. `MONGODB_URI=mongodb://localhost:27017/?replicaSet=rs0 npm test -- change-stream.replset`.
 * Anywhere else the file is skipped visibly, its reason in the name (change-stream.spec.ts runs the same wiring
 * through a scripted wire proxy, and the fallback on the standalone test server).
 */
const support = await detectTransactionSupport();
const describeWithStreams = support.supported ? describe : describe.skip;

describeWithStreams(`the jobs change stream on a real server (${support.reason})`, () => {
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    starts.clear();
  });

  const boot = async (dbName: string) => {
    const worker = await createJobsTestApp({
      dbName,
      options: { pollIntervalMs: 100, changeStreamPollIntervalMs: SAFETY_NET_MS },
      providers: [ReplsetHandlers],
    });
    const producer = await createJobsTestApp({ dbName, options: { worker: false } });
    apps.push(worker, producer);
    await waitFor(() => worker.get(JobChangeFeed).live, 'the stream to be live');
    await waitFor(() => worker.get(JobRunner).pollState().intervalMs === SAFETY_NET_MS, 'a safety-net sleep');
    return { worker, producer };
  };

  it('an enqueue in another process wakes the idle worker in milliseconds', async () => {
    const { producer } = await boot(uniqueDatabaseName('replset_stream_wake'));
    const sentAt = Date.now();
    await producer.jobs.enqueue('replset.streamed', { tag: 'now' });
    await waitFor(() => starts.has('now'), 'the stream to wake the worker', 5_000);
    expect((starts.get('now') as number) - sentAt).toBeLessThan(1_000);
  });

  it('a delayed job enqueued in another process starts at its runAt', async () => {
    const { producer } = await boot(uniqueDatabaseName('replset_stream_later'));
    const runAt = new Date(Date.now() + 1_500);
    await producer.jobs.enqueue('replset.streamed', { tag: 'later' }, { runAt });
    await waitFor(() => starts.has('later'), 'the job to start', 5_000);
    const late = (starts.get('later') as number) - runAt.getTime();
    expect(late).toBeGreaterThanOrEqual(0);
    expect(late).toBeLessThan(1_000);
  });
});
