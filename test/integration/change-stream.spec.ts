import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Injectable, Logger } from '@nestjs/common';
import { JobHandler, type JobsModuleOptions } from '../../lib';
import { claimableChangesPipeline } from '../../lib/persistence/job-changes.store';
import { JobChangeFeed } from '../../lib/worker/job-change-feed';
import { JobRunner } from '../../lib/worker/job-runner.service';
import { ChangeStreamWireProxy } from '../support/change-stream-wire-proxy';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { connectTestClient, testMongoUri, uniqueDatabaseName } from '../support/test-database';

const starts = new Map<string, number>();

@Injectable()
class StreamedHandlers {
  @JobHandler('streamed')
  run(payload: { tag: string }) {
    starts.set(payload.tag, Date.now());
  }
}

/** Far longer than any wait below: only the stream (or the next-due timer it feeds) can start a job in time. */
const SAFETY_NET_MS = 20_000;

const apps: JobsTestApp[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
  starts.clear();
});

async function boot(dbName: string, options: JobsModuleOptions, uri?: string): Promise<JobsTestApp> {
  const app = await createJobsTestApp({ dbName, uri, options, providers: [StreamedHandlers] });
  apps.push(app);
  return app;
}

describe('change stream on a standalone server (the test server, for real)', () => {
  it('logs once, polls every pollIntervalMs, and still picks up jobs of other processes', async () => {
    const log = jest.spyOn(Logger.prototype, 'log');
    try {
      const dbName = uniqueDatabaseName('stream_fallback');
      const worker = await boot(dbName, { pollIntervalMs: 100 });
      const feed = worker.get(JobChangeFeed);
      await waitFor(() => feed.mode === 'unsupported', 'the feed to give up on change streams');
      const producer = await boot(dbName, { worker: false });
      await producer.jobs.enqueue('streamed', { tag: 'polled' });
      await waitFor(() => starts.has('polled'), 'the job to start by polling', 5_000);
      expect(feed.live).toBe(false);
      expect(worker.get(JobRunner).pollState().intervalMs).toBe(100);
      const notices = log.mock.calls.filter(([message]) => String(message).startsWith('No change streams'));
      expect(notices).toHaveLength(1);
    } finally {
      log.mockRestore();
    }
  });
});

describe('change stream through a wire proxy that scripts its events', () => {
  let proxy: ChangeStreamWireProxy;
  beforeAll(async () => {
    proxy = await ChangeStreamWireProxy.start(testMongoUri());
  });
  afterAll(async () => {
    await proxy?.close();
  });

  /** A worker through the proxy whose stream is live and whose loop sleeps the safety net. */
  const liveWorker = async (dbName: string) => {
    const opened = proxy.opens.length;
    const worker = await boot(dbName, { pollIntervalMs: 100, changeStreamPollIntervalMs: SAFETY_NET_MS }, proxy.uri);
    await waitFor(() => worker.get(JobChangeFeed).live, 'the stream to be live');
    await waitFor(() => worker.get(JobRunner).pollState().intervalMs === SAFETY_NET_MS, 'a safety-net sleep');
    expect(proxy.opens.length).toBe(opened + 1);
    return worker;
  };
  /** Jobs stored by a process the worker cannot hear (straight to the server): only the stream can tell it. */
  const producer = (dbName: string) => boot(dbName, { worker: false });

  it('opens one stream on the jobs collection, matching only changes that can make a job claimable', async () => {
    await liveWorker(uniqueDatabaseName('stream_open'));
    const open = proxy.opens[proxy.opens.length - 1];
    expect(open.collection).toBe('jobs');
    expect(open.options).toEqual({});
    expect(open.pipeline).toEqual(claimableChangesPipeline(['streamed']));
  });

  it('changeStream: false opens none, and the worker polls every pollIntervalMs', async () => {
    const opened = proxy.opens.length;
    const dbName = uniqueDatabaseName('stream_off');
    const worker = await boot(dbName, { pollIntervalMs: 100, changeStream: false }, proxy.uri);
    await (await producer(dbName)).jobs.enqueue('streamed', { tag: 'polled' });
    await waitFor(() => starts.has('polled'), 'the job to start by polling', 5_000);
    expect(proxy.opens.length).toBe(opened);
    expect(worker.get(JobChangeFeed).mode).toBe('off');
    expect(worker.get(JobRunner).pollState().intervalMs).toBe(100);
  });

  it('a change event wakes an idle worker', async () => {
    const dbName = uniqueDatabaseName('stream_wake');
    await liveWorker(dbName);
    await (await producer(dbName)).jobs.enqueue('streamed', { tag: 'woken' });
    proxy.emit({ operationType: 'insert', runAt: new Date() });
    await waitFor(() => starts.has('woken'), 'the event to wake the worker', 5_000);
  });

  it('a change event for a later runAt starts the job at that runAt', async () => {
    const dbName = uniqueDatabaseName('stream_due_later');
    await liveWorker(dbName);
    const runAt = new Date(Date.now() + 1_500);
    await (await producer(dbName)).jobs.enqueue('streamed', { tag: 'later' }, { runAt });
    proxy.emit({ operationType: 'insert', runAt });
    await waitFor(() => starts.has('later'), 'the job to start', 5_000);
    const late = (starts.get('later') as number) - runAt.getTime();
    expect(late).toBeGreaterThanOrEqual(0);
    expect(late).toBeLessThan(1_000);
  });

  it('after an error the stream resumes from its last token, and its events wake the worker again', async () => {
    const dbName = uniqueDatabaseName('stream_resume');
    const worker = await liveWorker(dbName);
    const jobs = (await producer(dbName)).jobs;
    await jobs.enqueue('streamed', { tag: 'before' });
    const token = proxy.emit({ operationType: 'insert', runAt: new Date() });
    await waitFor(() => starts.has('before'), 'the first event to wake the worker', 5_000);
    const opened = proxy.opens.length;
    proxy.failNextGetMore({ code: 280, codeName: 'ChangeStreamFatalError' });
    await waitFor(() => proxy.opens.length === opened + 1, 'the stream to be reopened');
    expect(proxy.opens[opened].options).toEqual({ resumeAfter: token });
    await waitFor(() => worker.get(JobChangeFeed).live, 'the reopened stream to be live');
    // Back to the safety net: only the reopened stream can wake the worker for the next job.
    await waitFor(() => worker.get(JobRunner).pollState().intervalMs === SAFETY_NET_MS, 'a safety-net sleep');
    await jobs.enqueue('streamed', { tag: 'after' });
    proxy.emit({ operationType: 'insert', runAt: new Date() });
    await waitFor(() => starts.has('after'), 'an event of the reopened stream to wake the worker', 5_000);
  });
});

describe("the stream's $match, evaluated by the server's query engine on sample change events", () => {
  it('passes enqueues of the names run here, rows back to pending and moved runAts; not claims, renewals or outcomes', async () => {
    const client = await connectTestClient({ maxPoolSize: 1 });
    const db = client.db(uniqueDatabaseName('stream_match'));
    try {
      const at = new Date();
      const events = {
        enqueue: { operationType: 'insert', fullDocument: { name: 'a', status: 'pending', runAt: at } },
        replaced: { operationType: 'replace', fullDocument: { name: 'b', status: 'pending', runAt: at } },
        otherName: { operationType: 'insert', fullDocument: { name: 'c', status: 'pending', runAt: at } },
        insertedRunning: { operationType: 'insert', fullDocument: { name: 'a', status: 'running', runAt: at } },
        claim: {
          operationType: 'update',
          updateDescription: { updatedFields: { status: 'running', lockedUntil: at } },
        },
        renewal: { operationType: 'update', updateDescription: { updatedFields: { lockedUntil: at } } },
        completed: { operationType: 'update', updateDescription: { updatedFields: { status: 'completed' } } },
        retry: { operationType: 'update', updateDescription: { updatedFields: { status: 'pending', runAt: at } } },
        handedBack: { operationType: 'update', updateDescription: { updatedFields: { status: 'pending' } } },
        debounced: { operationType: 'update', updateDescription: { updatedFields: { runAt: at } } },
        deleted: { operationType: 'delete' },
      };
      await db.collection('events').insertMany(Object.entries(events).map(([kind, event]) => ({ kind, ...event })));
      const [match] = claimableChangesPipeline(['a', 'b']);
      const passed = await db.collection('events').find(match.$match).toArray();
      expect(passed.map((event) => event.kind).sort()).toEqual([
        'debounced',
        'enqueue',
        'handedBack',
        'replaced',
        'retry',
      ]);
    } finally {
      await db.dropDatabase();
      await client.close();
    }
  });
});
