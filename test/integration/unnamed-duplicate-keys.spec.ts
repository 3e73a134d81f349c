import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { Document } from 'bson';
import type { Collection, MongoClient } from 'mongodb';
import { JobHandler, UniqueIndexRejectedJobError } from '../../lib';
import { JobEnqueuer } from '../../lib/enqueue/job-enqueuer.service';
import { type ActiveErrorRule, ErrorReplyProxy } from '../support/error-reply-proxy';
import { createJobsTestApp, type JobsTestApp } from '../support/jobs-app';
import { connectTestClient, testMongoUri, uniqueDatabaseName } from '../support/test-database';

@Injectable()
class Handlers {
  /** Never run here (no worker): its jobs stay pending, the live holders the reads must find. */
  @JobHandler('keyed')
  keyed() {}

  @JobHandler('ticking')
  ticking() {}
}

/** DocumentDB's (Cosmos DB vCore) wording: it names the index its way, and sends no keyPattern/keyValue. */
const documentDbClash = (index: string) => ({
  code: 11000,
  errmsg: `Duplicate key violation on the requested collection: Index '${index}'`,
});
/** A duplicate key that names nothing at all. */
const bareClash = { code: 11000, errmsg: 'E11000 duplicate key error' };

describe('duplicate keys that do not name an index the MongoDB way (wire proxy answering the insert)', () => {
  let proxy: ErrorReplyProxy;
  let app: JobsTestApp;
  let client: MongoClient;
  let raw: Collection<Document>;
  let rule: ActiveErrorRule | undefined;
  /** Every insert of a job answered with `error` (an application's index refuses it each time), until the test ends. */
  const refuseInserts = (error: { code: number; errmsg: string }) => {
    rule = proxy.answerWithError({ ...error, match: (command) => command.insert === 'jobs', times: 100 });
  };

  beforeAll(async () => {
    proxy = await ErrorReplyProxy.start(testMongoUri());
    const dbName = uniqueDatabaseName('unnamed-duplicate-keys');
    // Jobs stay pending: only holders are needed here, not runs.
    app = await createJobsTestApp({ dbName, uri: proxy.uri, options: { worker: false }, providers: [Handlers] });
    client = await connectTestClient({ maxPoolSize: 2 });
    raw = client.db(dbName).collection('jobs');
  });
  afterEach(() => rule?.remove());
  afterAll(async () => {
    await app?.close();
    await client?.close();
    await proxy?.close();
  });

  describe('dedupe', () => {
    it('DocumentDB wording naming the dedupe index, with a live holder: deduplicated to the holder', async () => {
      const holder = await app.jobs.enqueue('keyed', {}, { dedupeKey: 'docdb-held' });
      refuseInserts(documentDbClash('dedupe_scope'));
      const again = await app.jobs.enqueue('keyed', {}, { dedupeKey: 'docdb-held' });
      expect(again).toMatchObject({ id: holder.id, deduplicated: true });
    });

    it("DocumentDB wording naming the application's index, though a holder exists: UniqueIndexRejectedJobError", async () => {
      await app.jobs.enqueue('keyed', {}, { dedupeKey: 'docdb-app-index' });
      refuseInserts(documentDbClash('by_order'));
      const attempt = app.jobs.enqueue('keyed', {}, { dedupeKey: 'docdb-app-index' });
      await expect(attempt).rejects.toBeInstanceOf(UniqueIndexRejectedJobError);
      await expect(attempt).rejects.toMatchObject({ indexName: 'by_order', jobName: 'keyed' });
      expect(await raw.countDocuments({ dedupeKey: 'docdb-app-index' })).toBe(1);
    });

    it('DocumentDB wording, no holder: UniqueIndexRejectedJobError, nothing stored', async () => {
      refuseInserts(documentDbClash('by_order'));
      await expect(app.jobs.enqueue('keyed', {}, { dedupeKey: 'docdb-free' })).rejects.toBeInstanceOf(
        UniqueIndexRejectedJobError,
      );
      expect(await raw.countDocuments({ dedupeKey: 'docdb-free' })).toBe(0);
    });

    it('an error naming nothing, with a live holder: the read finds it and the enqueue deduplicates', async () => {
      const holder = await app.jobs.enqueue('keyed', {}, { dedupeKey: 'bare-held' });
      refuseInserts(bareClash);
      const again = await app.jobs.enqueue('keyed', {}, { dedupeKey: 'bare-held' });
      expect(again).toMatchObject({ id: holder.id, deduplicated: true });
      expect(rule?.hits).toBe(1);
    });

    it('an error naming nothing, no holder: UniqueIndexRejectedJobError (index unnamed), nothing stored', async () => {
      refuseInserts(bareClash);
      const attempt = app.jobs.enqueue('keyed', {}, { dedupeKey: 'bare-free' });
      await expect(attempt).rejects.toBeInstanceOf(UniqueIndexRejectedJobError);
      await expect(attempt).rejects.toMatchObject({ indexName: null });
      expect(await raw.countDocuments({ dedupeKey: 'bare-free' })).toBe(0);
    });
  });

  describe('cron ticks', () => {
    it('an error naming nothing, the tick row exists: another instance was first (false)', async () => {
      const enqueuer = app.get(JobEnqueuer);
      const at = new Date(Math.floor(Date.now() / 60_000) * 60_000);
      expect(await enqueuer.enqueueTick('ticking', at)).toBe(true);
      refuseInserts(bareClash);
      expect(await enqueuer.enqueueTick('ticking', at)).toBe(false);
      expect(rule?.hits).toBe(1);
    });

    it('DocumentDB wording or none, no tick row: UniqueIndexRejectedJobError, never a silent false', async () => {
      const enqueuer = app.get(JobEnqueuer);
      for (const [minute, error] of [
        [1, bareClash],
        [2, documentDbClash('by_order')],
      ] as const) {
        const at = new Date(Math.floor(Date.now() / 60_000) * 60_000 - minute * 60_000);
        refuseInserts(error);
        await expect(enqueuer.enqueueTick('ticking', at)).rejects.toBeInstanceOf(UniqueIndexRejectedJobError);
        rule?.remove();
        expect(await raw.countDocuments({ name: 'ticking', runAt: at })).toBe(0);
      }
    });
  });
});
