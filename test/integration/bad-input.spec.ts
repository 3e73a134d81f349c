import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import {
  InvalidDurationError,
  InvalidJobIdError,
  InvalidOptionError,
  InvalidPayloadError,
  type JobExecutionContext,
  JobHandler,
  JobsError,
  UnknownJobError,
} from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { sleep } from '../support/sleep';
import { uniqueDatabaseName } from '../support/test-database';

const extendErrors: unknown[] = [];
let renewWrites = 0;
let lateReturns = 0;

@Injectable()
class BadInputHandlers {
  @JobHandler('ok')
  ok() {}

  @JobHandler('bad-extends')
  async badExtends(_payload: unknown, ctx: JobExecutionContext) {
    for (const ms of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, 1e300, '100' as unknown as number]) {
      await ctx.extendLockTime(ms).catch((error: unknown) => extendErrors.push(error));
    }
  }

  @JobHandler('throws', { maxAttempts: 1 })
  throws(payload: { value: 'string' | 'undefined' | 'null' }) {
    throw { string: 'a plain string', undefined: undefined, null: null }[payload.value];
  }

  @JobHandler('never-resolves', { timeoutMs: 100, maxAttempts: 1 })
  neverResolves() {
    return new Promise(() => undefined);
  }

  @JobHandler('ignores-timeout', { timeoutMs: 100, maxAttempts: 1 })
  async ignoresTimeout() {
    await sleep(400);
    lateReturns += 1;
    return 'late success';
  }
}

describe('bad input: typed errors, nothing written or lost', () => {
  let app: JobsTestApp;
  let existingId: string;
  let snapshot: unknown[];

  const rows = () => app.connection.collection('jobs').find({}).sort({ _id: 1 }).toArray();

  beforeAll(async () => {
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('bad_input'),
      // A short lease: a handler that never settles is taken over within about a second.
      options: { pollIntervalMs: 20, leaseMs: 600 },
      providers: [BadInputHandlers],
    });
    existingId = (await app.jobs.enqueue('ok', { keep: true }, { delayMs: 3_600_000 })).id;
    const renew = app.stores.lease.renewLease.bind(app.stores.lease);
    app.stores.lease.renewLease = (...args) => {
      renewWrites += 1;
      return renew(...args);
    };
  });
  afterAll(() => app.close());

  beforeEach(async () => {
    await waitFor(async () => (await app.jobs.stats()).running === 0, 'no running jobs');
    snapshot = await rows();
  });

  const expectNothingChanged = async () => expect(await rows()).toEqual(snapshot);

  describe.each([
    ['object-shaped { $ne: null }', { $ne: null }],
    ['object-shaped { $gt: "" }', { $gt: '' }],
    ['malformed string', 'not-an-object-id'],
    ['empty string', ''],
  ])('id: %s', (_label, id) => {
    const badId = id as unknown as string;

    it.each([['findById'], ['cancel'], ['retry']] as const)('%s throws InvalidJobIdError', async (method) => {
      await expect(app.jobs[method](badId)).rejects.toBeInstanceOf(InvalidJobIdError);
      await expectNothingChanged();
    });

    it('runNow answers not_found', async () => {
      expect(await app.jobs.runNow(badId)).toEqual({ kind: 'not_found' });
      await expectNothingChanged();
    });
  });

  it.each<[string, unknown, new (...args: never[]) => JobsError]>([
    ['an unknown name', 'no-such-job', UnknownJobError],
    ['an empty name', '', InvalidOptionError],
    ['a non-string name', 42, InvalidOptionError],
    ['a 10,000-character name', 'x'.repeat(10_000), InvalidOptionError],
  ])('enqueue with %s throws a typed error', async (_label, name, type) => {
    await expect(app.jobs.enqueue(name as string, {})).rejects.toBeInstanceOf(type);
    await expectNothingChanged();
  });

  const circular: Record<string, unknown> = {};
  circular.self = circular;

  it.each<[string, unknown]>([
    ['a function', { callback: () => 1 }],
    ['a circular reference', circular],
    ['over 16 MB', { blob: 'x'.repeat(17 * 1024 * 1024) }],
    ['a $-prefixed key', { $set: { status: 'completed' } }],
    ['a dotted key', { 'status.x': 1 }],
    ['a class instance', { when: new Map([[1, 2]]) }],
  ])('enqueue with a payload containing %s throws InvalidPayloadError', async (_label, payload) => {
    await expect(app.jobs.enqueue('ok', payload)).rejects.toBeInstanceOf(InvalidPayloadError);
    await expectNothingChanged();
  });

  it.each<[string, object]>([
    ['negative delayMs', { delayMs: -1 }],
    ['NaN delayMs', { delayMs: Number.NaN }],
    ['Infinity delayMs', { delayMs: Number.POSITIVE_INFINITY }],
    ['a delayMs past any valid Date', { delayMs: 1e300 }],
    ['an invalid runAt Date', { runAt: new Date('nonsense') }],
    ['a runAt that is no Date', { runAt: '2026-01-01' }],
    ['NaN priority', { priority: Number.NaN }],
    ['Infinity priority', { priority: Number.NEGATIVE_INFINITY }],
    ['maxAttempts 0', { maxAttempts: 0 }],
    ['fractional maxAttempts', { maxAttempts: 1.5 }],
    ['an empty dedupeKey', { dedupeKey: '' }],
  ])('enqueue with %s throws InvalidOptionError', async (_label, options) => {
    await expect(app.jobs.enqueue('ok', {}, options)).rejects.toBeInstanceOf(InvalidOptionError);
    await expectNothingChanged();
  });

  // A misspelt key would otherwise be dropped, and the job stored without the dedupe or delay the caller meant.
  it.each<[string, object]>([
    ['a snake_case dedupe_key', { dedupe_key: 'k' }],
    ['delay instead of delayMs', { delay: 60_000 }],
    ['runat instead of runAt', { runat: new Date(Date.now() + 60_000) }],
    ['a __proto__ key from JSON', JSON.parse('{"__proto__":{"delayMs":60000}}')],
    ['a year 275760 runAt', { runAt: new Date(8.64e15) }],
    ['a runAt before the year 2000', { runAt: new Date('1999-12-31T23:59:59.999Z') }],
    ['a runAt after the year 9999', { runAt: new Date('+010000-01-01T00:00:00Z') }],
    ['maxAttempts 1e300', { maxAttempts: 1e300 }],
    ['maxAttempts 1,001', { maxAttempts: 1_001 }],
    ['a throttle that is no object', { throttle: 'k' }],
    ['a throttle without a key', { throttle: { windowMs: 1000 } }],
    ['a throttle with an empty key', { throttle: { key: ' ', windowMs: 1000 } }],
    ['a throttle window of 0 ms', { throttle: { key: 'k', windowMs: 0 } }],
    ['a throttle window of NaN ms', { throttle: { key: 'k', windowMs: Number.NaN } }],
    ['a throttle window of 1e-300 ms (every instant in one window)', { throttle: { key: 'k', windowMs: 1e-300 } }],
    ['a throttle window of 1.5 ms', { throttle: { key: 'k', windowMs: 1.5 } }],
    ['a misspelt throttle window', { throttle: { key: 'k', window: 1000 } }],
    ['a throttle beside a dedupeKey', { throttle: { key: 'k', windowMs: 1000 }, dedupeKey: 'k' }],
    ['a throttle beside a debounce', { throttle: { key: 'k', windowMs: 1000 }, debounce: { key: 'k', windowMs: 1 } }],
    ['a debounce window of Infinity ms', { debounce: { key: 'k', windowMs: Number.POSITIVE_INFINITY } }],
    ['a negative debounce maxWaitMs', { debounce: { key: 'k', windowMs: 1000, maxWaitMs: -1 } }],
    ['a debounce with a 201-character key', { debounce: { key: 'k'.repeat(201), windowMs: 1000 } }],
    ['a debounce beside a runAt', { debounce: { key: 'k', windowMs: 1000 }, runAt: new Date() }],
    ['a debounce beside a delayMs', { debounce: { key: 'k', windowMs: 1000 }, delayMs: 5 }],
    ['a debounce beside a dedupeKey', { debounce: { key: 'k', windowMs: 1000 }, dedupeKey: 'k' }],
  ])('enqueue with %s throws InvalidOptionError and stores nothing', async (_label, options) => {
    const enqueue = app.jobs.enqueue('ok', {}, options as never);
    await expect(enqueue).rejects.toBeInstanceOf(InvalidOptionError);
    await expectNothingChanged();
  });

  it('enqueue names the misspelt key and the keys it knows', async () => {
    await expect(app.jobs.enqueue('ok', {}, { dedupe_key: 'k' } as never)).rejects.toThrow(
      /Invalid option dedupe_key: is not an enqueue option \(runAt, delayMs, .*dedupeKey.*\)/,
    );
    await expectNothingChanged();
  });

  it('enqueue accepts the bounds themselves: runAt in 2000 and 9999, maxAttempts 1,000', async () => {
    const stored = [
      await app.jobs.enqueue('ok', {}, { runAt: new Date('9999-12-31T23:59:59.999Z') }),
      await app.jobs.enqueue('ok', {}, { maxAttempts: 1_000, delayMs: 3_600_000 }),
    ];
    expect(stored.map((job) => [job.runAt.getUTCFullYear(), job.maxAttempts])).toEqual([
      [9999, 5],
      [expect.any(Number), 1_000],
    ]);
    // A runAt in the past is due at once: run (and so deleted from the snapshot's view) like any other.
    const past = await app.jobs.enqueue('ok', {}, { runAt: new Date('2000-01-01T00:00:00.000Z') });
    await waitFor(async () => (await app.jobs.findById(past.id))?.status === 'completed', 'the 2000 job to run');
    for (const { id } of stored) await app.jobs.cancel(id);
  });

  it.each<[string, unknown[], object | undefined]>([
    [
      'an item whose options have a misspelt key',
      [{ name: 'ok' }, { name: 'ok', options: { dedupe_key: 'k' } }],
      undefined,
    ],
    ['an item with opts instead of options', [{ name: 'ok' }, { name: 'ok', opts: { delayMs: 60_000 } }], undefined],
    [
      'an item with a year 275760 runAt',
      [{ name: 'ok' }, { name: 'ok', options: { runAt: new Date(8.64e15) } }],
      undefined,
    ],
    ['batch options with an unknown key', [{ name: 'ok' }], { foo: 1 }],
    ['an empty batch with an unknown batch option', [], { foo: 1 }],
  ])(
    'enqueueMany with %s throws InvalidOptionError and stores nothing of the batch',
    async (_label, items, options) => {
      await expect(app.jobs.enqueueMany(items as never, options as never)).rejects.toBeInstanceOf(InvalidOptionError);
      await expectNothingChanged();
    },
  );

  it.each<[string, unknown]>([
    ['null', null],
    ['a number', 5],
    ['an unknown key', { timeout: 100 }],
    ['timeoutMs 0', { timeoutMs: 0 }],
    ['timeoutMs -1', { timeoutMs: -1 }],
    ['timeoutMs NaN', { timeoutMs: Number.NaN }],
    ['timeoutMs Infinity', { timeoutMs: Number.POSITIVE_INFINITY }],
    ['timeoutMs 1e300', { timeoutMs: 1e300 }],
    ['timeoutMs above a minute', { timeoutMs: 60_001 }],
    ['timeoutMs as a string', { timeoutMs: '100' }],
  ])('workerStatus with %s throws InvalidOptionError', async (_label, options) => {
    await expect(Promise.resolve().then(() => app.jobs.workerStatus(options as never))).rejects.toBeInstanceOf(
      InvalidOptionError,
    );
    // The bound itself is accepted (`database`, not `status`: this worker's 20 ms poll may lag on a busy machine).
    expect(await app.jobs.workerStatus({ timeoutMs: 60_000 })).toMatchObject({ database: 'up' });
  });

  it('enqueueMany stores nothing when one item is invalid', async () => {
    const items = [
      { name: 'ok', payload: { n: 1 } },
      { name: 'ok', payload: { n: 2 }, options: { delayMs: -5 } },
    ];
    await expect(app.jobs.enqueueMany(items)).rejects.toBeInstanceOf(InvalidOptionError);
    await expectNothingChanged();
  });

  it('extendLockTime(0 | -1 | NaN | Infinity | 1e300 | "100") rejects with InvalidDurationError and writes nothing', async () => {
    const writesBefore = renewWrites;
    const job = await app.jobs.enqueue('bad-extends');
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'completion');
    expect(extendErrors).toHaveLength(6);
    for (const error of extendErrors) expect(error).toBeInstanceOf(InvalidDurationError);
    expect(renewWrites).toBe(writesBefore);
  });

  it.each([
    ['string', 'a plain string'],
    ['undefined', 'Handler threw undefined instead of an Error'],
    ['null', 'Handler threw null instead of an Error'],
  ])('a handler throwing %s fails the attempt with a readable message', async (value, message) => {
    const job = await app.jobs.enqueue('throws', { value });
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'dead', 'dead');
    expect((await app.jobs.findById(job.id))?.attempts).toEqual([
      expect.objectContaining({ error: message, errorClass: 'NonError' }),
    ]);
  });

  it('a handler that never settles is abandoned after its timeout plus one lease, then dead-lettered by reclaim', async () => {
    const job = await app.jobs.enqueue('never-resolves');
    // Timeout at 100 ms, one lease (600 ms) to settle, then the lease is left to run out and the row is reclaimed:
    // the lost attempt was its only one.
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'dead', 'dead', 5_000);
    expect((await app.jobs.findById(job.id))?.attempts.map((a) => a.errorClass)).toEqual(['LeaseExpired']);
  });

  it('a handler that finishes after its timeout abort holds its slot until then, and what it did is recorded', async () => {
    const job = await app.jobs.enqueue('ignores-timeout');
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'running', 'running');
    await sleep(200); // past the 100 ms timeout
    expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'running', attemptCount: 0 });
    await waitFor(() => lateReturns === 1, 'the late return');
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'completed');
    expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'completed', attemptCount: 0 });
  });

  it('left the unrelated pending job untouched through all of this', async () => {
    expect(await app.jobs.findById(existingId)).toMatchObject({
      status: 'pending',
      payload: { keep: true },
      attemptCount: 0,
    });
  });
});
