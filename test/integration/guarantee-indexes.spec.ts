import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import type { MongoClient } from 'mongodb';
import type { Connection } from 'mongoose';
import { GUARANTEE_INDEXES } from '../../lib/persistence/guarantee-indexes';
import { JobIndexes } from '../../lib/persistence/job-indexes.service';
import { type CommandFault, FaultProxy } from '../support/fault-proxy';
import { createJobsTestApp } from '../support/jobs-app';
import { TcpProxy } from '../support/tcp-proxy';
import { connectTestClient, testMongoUri, uniqueDatabaseName } from '../support/test-database';

describe('indexes the guarantees depend on', () => {
  let client: MongoClient;
  const dbNames: string[] = [];
  const freshDb = (label: string) => {
    const name = uniqueDatabaseName(label);
    dbNames.push(name);
    return name;
  };

  beforeAll(async () => {
    client = await connectTestClient();
  });
  afterAll(async () => {
    // The Java test server cannot drop a database holding two indexes of one name; leave those behind.
    await Promise.all(
      dbNames.map((name) =>
        client
          .db(name)
          .dropDatabase()
          .catch(() => undefined),
      ),
    );
    await client.close();
  });

  it.each([
    { what: 'a non-unique index under the dedupe index name', field: 'dedupeScope', name: 'dedupe_scope' },
    { what: 'a non-unique index on the dedupe scope under another name', field: 'dedupeScope', name: 'by_scope' },
    { what: 'a non-unique index under the schedule index name', field: 'scheduleKey', name: 'schedule' },
    {
      what: 'a non-unique index under the concurrency slot index name',
      field: 'concurrencySlot',
      name: 'concurrency_slot',
    },
    { what: 'a non-unique index on the group slot under another name', field: 'groupSlot', name: 'by_group_slot' },
    { what: 'a non-unique index under the throttle index name', field: 'throttleScope', name: 'throttle_scope' },
    {
      what: 'a non-unique index on the debounce scope under another name',
      field: 'debounceScope',
      name: 'by_debounce',
    },
  ])('fail bootstrap with IndexConflictError naming the index when there is $what', async ({ field, name }) => {
    const dbName = freshDb('idx_conflict');
    await client
      .db(dbName)
      .collection('jobs')
      .createIndex({ [field]: 1 }, { name });
    const expectedIndex = GUARANTEE_INDEXES.find((index) => index.field === field)?.name;
    const boot = createJobsTestApp({ dbName, options: { worker: false } });
    await expect(boot).rejects.toMatchObject({ name: 'IndexConflictError', indexName: expectedIndex });
    await expect(boot).rejects.toThrow(new RegExp(`"${name}".*dropIndex\\('${name}'\\)`, 's'));
  });

  it('drop the old global dedupe index only when it is exactly the old one', async () => {
    const legacy = freshDb('idx_legacy');
    await client
      .db(legacy)
      .collection('jobs')
      .createIndex({ dedupeKey: 1 }, { name: 'dedupe', unique: true, sparse: true });
    const custom = freshDb('idx_custom');
    await client.db(custom).collection('jobs').createIndex({ dedupeKey: 1, name: 1 }, { name: 'dedupe' });
    const apps = [
      await createJobsTestApp({ dbName: legacy, options: { worker: false } }),
      await createJobsTestApp({ dbName: custom, options: { worker: false } }),
    ];
    try {
      const names = async (db: string) =>
        (await client.db(db).collection('jobs').listIndexes().toArray()).map((index) => index.name);
      expect(await names(legacy)).not.toContain('dedupe');
      expect(await names(custom)).toContain('dedupe');
      // With the old index gone, a finished job's retained key does not block a new job of the same key.
      const first = await apps[0].jobs.enqueue('x', null, { dedupeKey: 'k', strict: false });
      await apps[0].jobs.cancel(first.id);
      const second = await apps[0].jobs.enqueue('x', null, { dedupeKey: 'k', strict: false });
      expect(second.id).not.toBe(first.id);
    } finally {
      await Promise.all(apps.map((app) => app.close()));
    }
  });

  it('drop the old claim index only when it is exactly the old one', async () => {
    const legacy = freshDb('idx_old_claim');
    await client
      .db(legacy)
      .collection('jobs')
      .createIndex({ status: 1, priority: -1, runAt: 1, _id: 1 }, { name: 'claim' });
    const custom = freshDb('idx_custom_claim');
    await client.db(custom).collection('jobs').createIndex({ status: 1, runAt: 1 }, { name: 'claim' });
    const apps = [
      await createJobsTestApp({ dbName: legacy, options: { worker: false } }),
      await createJobsTestApp({ dbName: custom, options: { worker: false } }),
    ];
    try {
      const names = async (db: string) =>
        (await client.db(db).collection('jobs').listIndexes().toArray()).map((index) => index.name);
      expect(await names(legacy)).not.toContain('claim');
      expect(await names(legacy)).toContain('claim_by_name');
      expect(await names(custom)).toContain('claim');
    } finally {
      await Promise.all(apps.map((app) => app.close()));
    }
  });

  it('give pending jobs of an older version their dedupe scope, so their keys keep deduplicating per name', async () => {
    const dbName = freshDb('idx_upgrade');
    const at = new Date();
    const old = { payload: null, runAt: at, priority: 0, attemptCount: 0, maxAttempts: 5, attempts: [] };
    const { insertedId } = await client
      .db(dbName)
      .collection('jobs')
      .insertOne({ ...old, name: 'sync', status: 'pending', dedupeKey: 'old', fencingToken: 0, createdAt: at });
    await client
      .db(dbName)
      .collection('jobs')
      .createIndex({ dedupeKey: 1 }, { name: 'dedupe', unique: true, sparse: true });
    const app = await createJobsTestApp({ dbName, options: { worker: false } });
    try {
      const mail = await app.jobs.enqueue('mail', null, { dedupeKey: 'old', strict: false });
      expect(mail.id).not.toBe(insertedId.toHexString());
      expect((await app.jobs.enqueue('sync', null, { dedupeKey: 'old', strict: false })).id).toBe(
        insertedId.toHexString(),
      );
    } finally {
      await app.close();
    }
  });

  /** A pending keyed row as a version before per-name dedupe left it, under that version's global index. */
  const seedOlderVersion = async (dbName: string) => {
    const at = new Date();
    const { insertedId } = await client.db(dbName).collection('jobs').insertOne({
      name: 'sync',
      payload: null,
      status: 'pending',
      runAt: at,
      priority: 0,
      attemptCount: 0,
      maxAttempts: 5,
      attempts: [],
      dedupeKey: 'old',
      fencingToken: 0,
      createdAt: at,
    });
    await client
      .db(dbName)
      .collection('jobs')
      .createIndex({ dedupeKey: 1 }, { name: 'dedupe', unique: true, sparse: true });
    return insertedId.toHexString();
  };

  it('keep the pending keys of an older version deduplicating when the first start after the upgrade fails', async () => {
    const dbName = freshDb('idx_upgrade_retry');
    const oldId = await seedOlderVersion(dbName);
    await client.db(dbName).collection('jobs').createIndex({ scheduleKey: 1 }, { name: 'schedule' });
    await expect(createJobsTestApp({ dbName, options: { worker: false } })).rejects.toMatchObject({
      name: 'IndexConflictError',
      indexName: 'schedule',
    });
    // The operator applies the fix the error names, and starts again.
    await client.db(dbName).collection('jobs').dropIndex('schedule');
    const app = await createJobsTestApp({ dbName, options: { worker: false } });
    try {
      expect((await app.jobs.enqueue('sync', null, { dedupeKey: 'old', strict: false })).id).toBe(oldId);
      const names = (await client.db(dbName).collection('jobs').listIndexes().toArray()).map((index) => index.name);
      expect(names).not.toContain('dedupe');
    } finally {
      await app.close();
    }
  });

  it('log the drop of the old dedupe index only in the process that dropped it', async () => {
    const dbName = freshDb('idx_drop_once');
    const app = await createJobsTestApp({ dbName, options: { worker: false } });
    const log = jest.spyOn(Logger.prototype, 'log');
    try {
      await client
        .db(dbName)
        .collection('jobs')
        .createIndex({ dedupeKey: 1 }, { name: 'dedupe', unique: true, sparse: true });
      // Another process drops it between this one's listing and its own drop.
      const dropIndex = app.stores.index.dropIndex.bind(app.stores.index);
      app.stores.index.dropIndex = async (name) => {
        await client.db(dbName).collection('jobs').dropIndex(name);
        return dropIndex(name);
      };
      await app.get(JobIndexes).onModuleInit();
      expect(log.mock.calls.map(([message]) => String(message))).not.toContainEqual(expect.stringMatching(/Dropped/));
    } finally {
      log.mockRestore();
      await app.close();
    }
  });

  it('start on a database of an older version although a real server refuses list_by_dedupe_key beside its old index', async () => {
    const dbName = freshDb('idx_list_beside_legacy');
    const app = await createJobsTestApp({ dbName, options: { worker: false } });
    const warn = jest.spyOn(Logger.prototype, 'warn');
    try {
      await client
        .db(dbName)
        .collection('jobs')
        .createIndex({ dedupeKey: 1 }, { name: 'dedupe', unique: true, sparse: true });
      // The Java test server ignores non-unique indexes; a real mongod refuses a second index on { dedupeKey: 1 }
      // under another name (IndexOptionsConflict, code 85), as it would beside a user's own index on the same key.
      const create = app.stores.index.createDeclaredIndexes.bind(app.stores.index);
      app.stores.index.createDeclaredIndexes = async () => {
        const failures = await create();
        failures.set(
          'list_by_dedupe_key',
          Object.assign(new Error('Index already exists with a different name: dedupe'), {
            code: 85,
            codeName: 'IndexOptionsConflict',
          }),
        );
        return failures;
      };
      await app.get(JobIndexes).onModuleInit();
      const indexes = await client.db(dbName).collection('jobs').listIndexes().toArray();
      expect(indexes.map((index) => index.name)).not.toContain('dedupe');
      expect(warn.mock.calls.map(([message]) => String(message))).toContainEqual(
        expect.stringMatching(/list_by_dedupe_key.*dedupe/s),
      );
    } finally {
      warn.mockRestore();
      await app.close();
    }
  });

  it('fail bootstrap with IndexConflictError carrying the cause when a guarantee index cannot be created', async () => {
    const dbName = freshDb('idx_uncreatable');
    // Two rows of one tick: the unique schedule index cannot be built over them.
    await client
      .db(dbName)
      .collection('jobs')
      .insertMany([{ scheduleKey: 'cron:x:1' }, { scheduleKey: 'cron:x:1' }]);
    const boot = createJobsTestApp({ dbName, options: { worker: false } });
    await expect(boot).rejects.toMatchObject({
      name: 'IndexConflictError',
      indexName: 'schedule',
      conflictingIndex: null,
      cause: expect.objectContaining({ code: 11000 }),
    });
    // The library's own wording; the server's (MongoDB's 'duplicate key', DocumentDB's 'Duplicate key violation') is
    // not asserted: the cause's code says it.
    await expect(boot).rejects.toThrow(/is missing .* could not be created/s);
  });

  it('fail bootstrap with IndexSetupTimeoutError when the database stops answering during the old-key scan', async () => {
    const dbName = freshDb('idx_scan_blackhole');
    await seedOlderVersion(dbName);
    const proxy = await TcpProxy.start(testMongoUri());
    let scanSent = false;
    try {
      const boot = createJobsTestApp({
        dbName,
        uri: proxy.uri,
        mongoose: {
          monitorCommands: true,
          // The indexes are in place; the database stops answering once the scan for old keys is sent.
          connectionFactory: (connection: Connection) => {
            connection.getClient().on('commandStarted', (event) => {
              if (event.commandName !== 'find' || event.command.find !== 'jobs') return;
              scanSent = true;
              proxy.blackhole();
            });
            return connection;
          },
        },
        options: { worker: false, indexSetupTimeoutMs: 1000 },
      });
      await expect(boot).rejects.toMatchObject({ name: 'IndexSetupTimeoutError', timeoutMs: 1000 });
      expect(scanSent).toBe(true);
    } finally {
      await proxy.close();
    }
  });

  it('fail bootstrap with IndexSetupTimeoutError when the database stops answering during index creation', async () => {
    const proxy = await TcpProxy.start(testMongoUri());
    try {
      const boot = createJobsTestApp({
        dbName: freshDb('idx_blackhole'),
        uri: proxy.uri,
        // Connected: from here on the database swallows every request without an answer.
        mongoose: {
          connectionFactory: (connection: unknown) => {
            proxy.blackhole();
            return connection;
          },
        },
        options: { worker: false, indexSetupTimeoutMs: 300 },
      });
      await expect(boot).rejects.toMatchObject({ name: 'IndexSetupTimeoutError', timeoutMs: 300 });
    } finally {
      await proxy.close();
    }
  });

  describe('through transient errors during index setup', () => {
    /** A proxy answering the n-th `createIndexes` command (1-based) with `faultOf(n)`. */
    const proxyFaultingIndexCreation = async (faultOf: (n: number) => CommandFault | undefined) => {
      const proxy = await FaultProxy.start(testMongoUri());
      let sent = 0;
      proxy.setDecider((command) => (command.name === 'createIndexes' ? faultOf(++sent) : undefined));
      return { proxy, sent: () => sent };
    };
    const FAILOVER: CommandFault = { type: 'error-reply', code: 91, codeName: 'ShutdownInProgress' };

    it('start after a failover code and a lost answer, with every declared index in place', async () => {
      const dbName = freshDb('idx_transient');
      // The first command is refused with a failover code; the second executes and its answer is lost.
      const { proxy, sent } = await proxyFaultingIndexCreation((n) =>
        n === 1 ? FAILOVER : n === 2 ? { type: 'lose-reply' } : undefined,
      );
      const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
      try {
        const app = await createJobsTestApp({ dbName, uri: proxy.uri, options: { worker: false } });
        await app.close();
        expect(proxy.faults.map((fault) => fault.fault)).toEqual(['error-reply', 'lose-reply']);
        expect(sent()).toBeGreaterThan(2);
        const names = (await client.db(dbName).collection('jobs').listIndexes().toArray()).map((index) => index.name);
        for (const guarantee of GUARANTEE_INDEXES) expect(names).toContain(guarantee.name);
        expect(warn).toHaveBeenCalledWith(expect.stringMatching(/indexes of collection "jobs" failed .*trying again/));
      } finally {
        warn.mockRestore();
        await proxy.close();
      }
    });

    it('fail bootstrap at once on an error that is not transient, without trying again', async () => {
      const dbName = freshDb('idx_refused');
      const unauthorized: CommandFault = { type: 'error-reply', code: 13, codeName: 'Unauthorized' };
      const { proxy, sent } = await proxyFaultingIndexCreation(() => unauthorized);
      try {
        const boot = createJobsTestApp({ dbName, uri: proxy.uri, options: { worker: false } });
        await expect(boot).rejects.toMatchObject({
          name: 'IndexConflictError',
          cause: expect.objectContaining({ code: 13 }),
        });
        // One command per declared index, once: no second round.
        expect(sent()).toBe(proxy.faults.length);
        expect(sent()).toBeLessThanOrEqual(13);
      } finally {
        await proxy.close();
      }
    });

    it('fail bootstrap with IndexSetupTimeoutError carrying the last transient error when they never stop', async () => {
      const { proxy, sent } = await proxyFaultingIndexCreation(() => FAILOVER);
      const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
      try {
        const boot = createJobsTestApp({
          dbName: freshDb('idx_failover'),
          uri: proxy.uri,
          options: { worker: false, indexSetupTimeoutMs: 1000 },
        });
        await expect(boot).rejects.toMatchObject({
          name: 'IndexSetupTimeoutError',
          timeoutMs: 1000,
          cause: expect.objectContaining({ code: 91 }),
        });
        expect(sent()).toBeGreaterThan(1);
      } finally {
        warn.mockRestore();
        await proxy.close();
      }
    });
  });
});
