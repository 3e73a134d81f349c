import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { type Collection, type Db, MongoClient, MongoServerError } from 'mongodb';
import { type CommandKind, classifyCommand } from '../support/command-kind';
import { type CommandFault, type FaultedReply, FaultProxy } from '../support/fault-proxy';
import { serverErrorCodes } from '../support/server-error-codes';
import { connectTestClient, testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** The generative fault checker trusts this proxy to do exactly the fault it records: check each one here. */
describe('FaultProxy (fault checker tooling)', () => {
  let direct: MongoClient;
  let db: Db;
  let dbName: string;
  let proxy: FaultProxy;
  let client: MongoClient;
  let jobs: Collection;

  beforeAll(async () => {
    direct = await connectTestClient();
    dbName = uniqueDatabaseName('fault_proxy');
    db = direct.db(dbName);
  });

  afterEach(async () => {
    await client?.close(true).catch(() => undefined);
    await proxy?.close();
  });

  afterAll(async () => {
    await db.dropDatabase().catch(() => undefined);
    await direct.close();
  });

  /** A client through a fresh proxy that faults the first command of `kind` with `fault`. */
  async function through(kind: CommandKind, fault: CommandFault): Promise<void> {
    proxy = await FaultProxy.start(testMongoUri());
    let armed = true;
    proxy.setDecider((command) => {
      if (!armed || command.kind !== kind) return undefined;
      armed = false;
      return fault;
    });
    client = await MongoClient.connect(proxy.uri, { retryWrites: false, retryReads: false, socketTimeoutMS: 5_000 });
    jobs = client.db(dbName).collection('jobs');
  }

  it('loses the reply of a command that executed, and closes the connection', async () => {
    await through('enqueue', { type: 'lose-reply' });
    const failure = await jobs.insertOne({ name: 'lost', status: 'pending' }).then(
      () => undefined,
      (error: Error) => error,
    );
    expect(failure?.name).toBe('MongoNetworkError');
    expect(await db.collection('jobs').countDocuments({ name: 'lost' })).toBe(1);
    expect(proxy.faults).toEqual([
      expect.objectContaining({ kind: 'enqueue', command: 'insert', fault: 'lose-reply' }),
    ]);
  });

  it('names the row a lost claim reply returned', async () => {
    const replies: FaultedReply[] = [];
    proxy = await FaultProxy.start(testMongoUri(), { onFaultedReply: (reply) => replies.push(reply) });
    proxy.setDecider((command) => (command.kind === 'claim' ? { type: 'lose-reply' } : undefined));
    client = await MongoClient.connect(proxy.uri, { retryWrites: false, retryReads: false });
    const { insertedId } = await db.collection('jobs').insertOne({ name: 'claimed', status: 'pending' });
    await expect(
      client
        .db(dbName)
        .collection('jobs')
        .findOneAndUpdate({ _id: insertedId }, { $set: { status: 'running', lockedBy: 'w#2' } }),
    ).rejects.toThrow();
    expect(await db.collection('jobs').findOne({ _id: insertedId })).toMatchObject({ status: 'running' });
    expect(replies).toEqual([
      expect.objectContaining({ kind: 'claim', fault: 'lose-reply', job: insertedId.toHexString(), delivered: false }),
    ]);
  });

  it('answers an error reply instead of executing', async () => {
    await through('claim', { type: 'error-reply', code: 11601, codeName: 'Interrupted' });
    await db.collection('jobs').insertOne({ name: 'refused', status: 'pending' });
    const failure = await jobs
      .findOneAndUpdate({ name: 'refused' }, { $set: { status: 'running', lockedBy: 'w#1' } })
      .then(
        () => undefined,
        (error: Error) => error,
      );
    expect(failure).toBeInstanceOf(MongoServerError);
    expect((failure as MongoServerError).code).toBe(11601);
    expect(await db.collection('jobs').findOne({ name: 'refused' })).toMatchObject({ status: 'pending' });
    expect(proxy.faults).toEqual([expect.objectContaining({ kind: 'claim', fault: 'error-reply', code: 11601 })]);
  });

  it('delays a reply by the planned time', async () => {
    await through('read', { type: 'delay', ms: 400 });
    const started = Date.now();
    await jobs.findOne({ name: 'nothing' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(390);
    expect(proxy.faults).toEqual([expect.objectContaining({ kind: 'read', fault: 'delay', ms: 400 })]);
  });

  it('cuts every connection, then forwards again', async () => {
    await through('delete', { type: 'delay', ms: 0 });
    await jobs.findOne({});
    expect(proxy.openConnections).toBeGreaterThan(0);
    proxy.cutAll();
    expect(proxy.openConnections).toBe(0);
    // The pooled connection was cut under the client: the next command fails, the one after reconnects.
    await expect(jobs.findOne({})).rejects.toThrow('closed');
    await expect(jobs.findOne({})).resolves.toBeDefined();
    expect(proxy.faults.map((fault) => fault.fault)).toEqual(['cut']);
  });

  it('black-holes every command for a while, then cuts and recovers', async () => {
    await through('other', { type: 'delay', ms: 0 });
    await jobs.findOne({});
    proxy.blackhole(300);
    const started = Date.now();
    await expect(jobs.findOne({})).rejects.toThrow();
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    await expect(jobs.findOne({})).resolves.toBeDefined();
    expect(proxy.faults.map((fault) => fault.fault)).toContain('blackhole');
  });

  it('classifies claims, reclaims, renewals, outcomes, enqueues, reads and deletes', () => {
    const none = new Map();
    const update = (u: unknown) => classifyCommand('findAndModify', { findAndModify: 'jobs', update: u }, none);
    expect(update({ $set: { status: 'running', lockedBy: 'w#1' }, $inc: { fencingToken: 1 } })).toBe('claim');
    expect(update({ $set: { lockedBy: 'w#2', lockedUntil: new Date() }, $inc: { attemptCount: 1 } })).toBe('claim');
    expect(update({ $max: { lockedUntil: new Date() } })).toBe('renewal');
    expect(update({ $set: { status: 'completed' }, $unset: { lockedBy: '' } })).toBe('outcome');
    const bulk = new Map([['updates', [{ q: {}, u: { $max: { lockedUntil: new Date() } } }]]]);
    expect(classifyCommand('update', { update: 'jobs' }, bulk)).toBe('renewal');
    expect(classifyCommand('insert', { insert: 'jobs' }, none)).toBe('enqueue');
    expect(classifyCommand('aggregate', { aggregate: 'jobs' }, none)).toBe('read');
    expect(classifyCommand('delete', { delete: 'jobs' }, none)).toBe('delete');
    expect(classifyCommand('createIndexes', { createIndexes: 'jobs' }, none)).toBe('other');
  });

  it('draws error codes from the library lists and from neither', () => {
    const codes = serverErrorCodes();
    expect(codes.transient).toContain(91);
    expect(codes.document).toContain(10334);
    expect(codes.unlisted).toContain(11601);
    expect(codes.unlisted.some((code) => codes.transient.includes(code) || codes.document.includes(code))).toBe(false);
  });
});
