import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { Document } from 'bson';
import type { Collection, MongoClient } from 'mongodb';
import type { Subscription } from 'rxjs';
import { type JobEvent, type JobExecutionContext, JobHandler } from '../../lib';
import { ErrorReplyProxy, type InjectedError, isClaim, isStatusUpdate } from '../support/error-reply-proxy';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { connectTestClient, testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** Handler calls per job id. */
const calls = new Map<string, number>();
const count = (jobId: string) => calls.set(jobId, (calls.get(jobId) ?? 0) + 1);
/** What a `renewing` handler waits for before it returns (set per test). */
let keepRunningUntil: () => Promise<void> = async () => undefined;

@Injectable()
class Handlers {
  @JobHandler('quick')
  quick(_payload: unknown, ctx: JobExecutionContext) {
    count(ctx.jobId);
    return { done: true };
  }

  @JobHandler('limited', { globalConcurrency: 1 })
  limited(_payload: unknown, ctx: JobExecutionContext) {
    count(ctx.jobId);
  }

  @JobHandler('renewing')
  async renewing(_payload: unknown, ctx: JobExecutionContext) {
    count(ctx.jobId);
    await keepRunningUntil();
  }
}

/** A lease renewal, alone (`findAndModify`) or batched (`update` with several owner-fenced `$max`). */
const isRenewal = (command: Document) =>
  (command.findAndModify === 'jobs' && (command.update as Document | undefined)?.$max?.lockedUntil !== undefined) ||
  (command.update === 'jobs' && (command.updates as Document[])[0]?.u?.$max?.lockedUntil !== undefined);

/** Server errors that say nothing about the document written: some a server really answers, one made up, one codeless. */
const UNFAMILIAR: [string, InjectedError][] = [
  ['11601 Interrupted', { code: 11601, codeName: 'Interrupted' }],
  ['11602 InterruptedDueToReplStateChange', { code: 11602, codeName: 'InterruptedDueToReplStateChange' }],
  ['a made-up code (99999)', { code: 99999 }],
  ['an error without a code', { code: undefined }],
];

describe('server errors nobody listed, on owner-fenced writes (wire proxy answering error replies)', () => {
  let proxy: ErrorReplyProxy;
  let app: JobsTestApp;
  let client: MongoClient;
  let raw: Collection<Document>;
  const events: JobEvent[] = [];
  let subscription: Subscription;

  beforeAll(async () => {
    proxy = await ErrorReplyProxy.start(testMongoUri());
    const dbName = uniqueDatabaseName('unfamiliar-errors');
    app = await createJobsTestApp({
      dbName,
      uri: proxy.uri,
      options: { pollIntervalMs: 20, leaseMs: 1_000, heartbeatIntervalMs: 200 },
      providers: [Handlers],
    });
    subscription = app.jobs.events$.subscribe((event) => events.push(event));
    client = await connectTestClient({ maxPoolSize: 2 });
    raw = client.db(dbName).collection('jobs');
  });
  afterAll(async () => {
    subscription?.unsubscribe();
    await app?.close();
    await client?.close();
    await proxy?.close();
  });

  const finished = async (id: string) => {
    await waitFor(async () => {
      const status = (await app.jobs.findById(id))?.status;
      return status !== 'pending' && status !== 'running';
    }, `job ${id} to finish`);
    return app.jobs.findById(id);
  };

  it.each(UNFAMILIAR)(
    'completes a job whose completion write was answered %s once; the handler ran once',
    async (_label, error) => {
      const job = await app.jobs.enqueue('quick', { case: _label });
      const rule = proxy.answerWithError({
        ...error,
        match: (command) => isStatusUpdate(command, 'jobs', 'completed'),
      });
      const row = await finished(job.id);
      expect(rule.hits).toBe(1);
      expect(row).toMatchObject({ status: 'completed', attemptCount: 0, attempts: [], result: { done: true } });
      expect(calls.get(job.id)).toBe(1);
      // A heartbeat may renew the lease while the completion is sent again (on a loaded machine the retry can take
      // longer than the 200 ms heartbeat): the lease is kept until the outcome lands, so `renewed` may come between.
      const seen = events.filter((event) => event.jobId === job.id && event.type !== 'renewed');
      expect(seen.map((event) => event.type)).toEqual(['enqueued', 'started', 'completed']);
    },
  );

  it('retries an unfamiliar error for one lease, then leaves the row to its lease: reclaimed, attempt counted, run again', async () => {
    const job = await app.jobs.enqueue('quick', { case: 'keeps failing' });
    let firstLock: unknown;
    const rule = proxy.answerWithError({
      code: 11601,
      times: Number.POSITIVE_INFINITY,
      match: (command) => {
        if (!isStatusUpdate(command, 'jobs', 'completed')) return false;
        const filter = (command.updates as Document[])[0].q as { _id: { toHexString(): string }; lockedBy: unknown };
        if (filter._id.toHexString() !== job.id) return false;
        firstLock ??= filter.lockedBy;
        return filter.lockedBy === firstLock;
      },
    });
    const row = await finished(job.id);
    rule.remove();
    expect(rule.hits).toBeGreaterThan(3);
    expect(row).toMatchObject({ status: 'completed', attemptCount: 1 });
    expect(row?.attempts.map((attempt) => attempt.errorClass)).toEqual(['LeaseExpired']);
    expect(calls.get(job.id)).toBe(2);
  });

  it.each([
    ['10334 BSONObjectTooLarge', 10334],
    ['2 BadValue', 2],
    ['121 DocumentValidationFailure', 121],
  ])(
    'still dead-letters the outcome at once when the completion write is refused for the document (%s)',
    async (_label, code) => {
      const job = await app.jobs.enqueue('quick', { case: _label });
      const rule = proxy.answerWithError({ code, match: (command) => isStatusUpdate(command, 'jobs', 'completed') });
      const row = await finished(job.id);
      expect(rule.hits).toBe(1);
      expect(row?.status).toBe('dead');
      expect(row?.lastError).toContain('The outcome (completed) could not be stored');
      expect(calls.get(job.id)).toBe(1);
    },
  );

  it.each(['quick', 'limited'])(
    'retries claims of "%s" answered with unfamiliar errors: the job is not lost and runs once',
    async (name) => {
      const rules = UNFAMILIAR.map(([, error]) => proxy.answerWithError({ ...error, match: isClaim }));
      const job = await app.jobs.enqueue(name);
      const row = await finished(job.id);
      expect(rules.map((rule) => rule.hits)).toEqual([1, 1, 1, 1]);
      expect(row).toMatchObject({ status: 'completed', attemptCount: 0 });
      expect(calls.get(job.id)).toBe(1);
    },
  );

  it('keeps a lease whose renewals were answered with unfamiliar errors (two heartbeats of a five-beat lease)', async () => {
    const rules = [
      proxy.answerWithError({ code: 11601, match: isRenewal }),
      proxy.answerWithError({ code: 99999, match: isRenewal }),
    ];
    keepRunningUntil = () =>
      waitFor(
        () =>
          rules.every((rule) => rule.hits === 1) && events.some((e) => e.name === 'renewing' && e.type === 'renewed'),
        'both renewal errors, then a renewal that landed',
      );
    const job = await app.jobs.enqueue('renewing');
    const row = await finished(job.id);
    expect(row).toMatchObject({ status: 'completed', attemptCount: 0 });
    expect(calls.get(job.id)).toBe(1);
    expect(events.filter((event) => event.jobId === job.id && event.type === 'stale')).toEqual([]);
  });

  it('keeps two leases whose batched renewal commands were answered with unfamiliar errors', async () => {
    const isBatchedRenewal = (command: Document) =>
      command.update === 'jobs' &&
      (command.updates as Document[]).length > 1 &&
      (command.updates as Document[]).every((update) => update.u?.$max?.lockedUntil !== undefined);
    const rules = [
      proxy.answerWithError({ code: 11601, match: isBatchedRenewal }),
      proxy.answerWithError({ code: undefined, match: isBatchedRenewal }),
    ];
    const renewedAfter = (id: string) => events.filter((e) => e.jobId === id && e.type === 'renewed').length;
    const bothRefused = () => rules.every((rule) => rule.hits === 1);
    // The two leases renew in one command only when their beats fell into one bucket of the heartbeat clock (claimed
    // close together); on a loaded machine they may not. Such a pair is let go after a few lone renewals each and the
    // scenario runs again with two new jobs: the precondition is retried, never taken for a failure.
    for (let tries = 1; !bothRefused(); tries += 1) {
      if (tries > 5) throw new Error('five pairs of jobs never renewed their leases in one command');
      let jobs: { id: string }[] = [];
      keepRunningUntil = () =>
        waitFor(
          () =>
            jobs.length === 2 &&
            ((bothRefused() && jobs.every((job) => renewedAfter(job.id) > 0)) ||
              (!rules.some((rule) => rule.hits > 0) && jobs.every((job) => renewedAfter(job.id) >= 4))),
          'both batched renewal errors, then renewals of both leases that landed (or lone renewals only)',
        );
      jobs = await app.jobs.enqueueMany([{ name: 'renewing' }, { name: 'renewing' }]);
      for (const job of jobs) {
        expect(await finished(job.id)).toMatchObject({ status: 'completed', attemptCount: 0 });
        expect(calls.get(job.id)).toBe(1);
        expect(events.filter((event) => event.jobId === job.id && event.type === 'stale')).toEqual([]);
      }
    }
  });

  it('sets a refused row aside on a later poll when marking it failed was answered 11601 (not skipped for good)', async () => {
    // A row the server refuses to claim (an `$inc` on a string), written by another tool, sorted first.
    const at = new Date(Date.now() - 60_000);
    const { insertedId } = await raw.insertOne({
      name: 'quick',
      payload: null,
      status: 'pending',
      runAt: at,
      priority: 100,
      attemptCount: 0,
      maxAttempts: 5,
      attempts: [],
      fencingToken: 'x',
      createdAt: at,
      updatedAt: at,
    });
    const rule = proxy.answerWithError({ code: 11601, match: (command) => isStatusUpdate(command, 'jobs', 'failed') });
    const id = insertedId.toHexString();
    const row = await finished(id);
    expect(rule.hits).toBe(1);
    expect(row?.status).toBe('failed');
    expect(row?.lastError).toContain('could not be claimed');
    expect(calls.get(id)).toBeUndefined();
  });
});
