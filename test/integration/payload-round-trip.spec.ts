import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { JobHandler } from '../../lib';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

const received: unknown[] = [];
let gate = deferred();

@Injectable()
class EchoHandlers {
  @JobHandler('echo')
  async echo(payload: unknown) {
    received.push(payload);
    gate.resolve();
  }
}

describe('payload round trip through MongoDB', () => {
  let app: JobsTestApp;

  beforeAll(async () => {
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('payload'),
      options: { pollIntervalMs: 20 },
      providers: [EchoHandlers],
    });
  });
  afterAll(() => app.close());

  const sent = () => ({
    buffer: Buffer.from('héllo'),
    bytes: new Uint8Array([0, 1, 255]),
    nested: { list: [Buffer.from([7]), new Uint8Array([8])], empty: Buffer.alloc(0) },
    text: 'plain',
    numbers: [Number.NaN, Number.POSITIVE_INFINITY, -0, 2 ** 53],
  });
  /** Bytes come back as Buffers, a Uint8Array included (a Buffer is a Uint8Array). */
  const expected = () => ({
    buffer: Buffer.from('héllo'),
    bytes: Buffer.from([0, 1, 255]),
    nested: { list: [Buffer.from([7]), Buffer.from([8])], empty: Buffer.alloc(0) },
    text: 'plain',
    numbers: [Number.NaN, Number.POSITIVE_INFINITY, -0, 2 ** 53],
  });

  async function runEcho(payload: unknown): Promise<unknown> {
    gate = deferred();
    const before = received.length;
    const job = await app.jobs.enqueue('echo', payload);
    await gate.promise;
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'echo completed');
    expect(received).toHaveLength(before + 1);
    return received[before];
  }

  it('hands Buffers and Uint8Arrays to the handler as Buffers with the same bytes', async () => {
    const payload = (await runEcho(sent())) as ReturnType<typeof expected>;
    expect(payload).toStrictEqual(expected());
    expect(payload.bytes).toBeInstanceOf(Uint8Array);
  });

  it('reads them back the same way in JobRecord.payload, which can be enqueued again', async () => {
    const job = await app.jobs.enqueue('echo', sent(), { delayMs: 3_600_000 });
    const record = await app.jobs.findById(job.id);
    expect(record?.payload).toStrictEqual(expected());
    expect(await runEcho(record?.payload)).toStrictEqual(expected());
  });

  it('hands a Buffer-only payload back as Buffers that can be enqueued again', async () => {
    const job = await app.jobs.enqueue('echo', { file: Buffer.from('abc') }, { delayMs: 3_600_000 });
    const record = await app.jobs.findById<{ file: Buffer }>(job.id);
    expect(Buffer.isBuffer(record?.payload.file)).toBe(true);
    await expect(app.jobs.enqueue('echo', record?.payload, { delayMs: 3_600_000 })).resolves.toBeDefined();
  });

  it('enqueue returns the payload as given; findById and a dedupe holder return it as stored', async () => {
    const given = { bytes: new Uint8Array([1, 2]), gone: undefined };
    const job = await app.jobs.enqueue('echo', given, { delayMs: 3_600_000, dedupeKey: 'as-given' });
    expect(job.payload).toBe(given);
    expect(Buffer.isBuffer(given.bytes)).toBe(false);
    const stored = { bytes: Buffer.from([1, 2]) };
    expect((await app.jobs.findById(job.id))?.payload).toStrictEqual(stored);
    const holder = await app.jobs.enqueue('echo', { other: true }, { delayMs: 3_600_000, dedupeKey: 'as-given' });
    expect(holder.id).toBe(job.id);
    expect(holder.payload).toStrictEqual(stored);
    await app.jobs.cancel(job.id);
  });

  it.each([
    { how: 'throttle', options: { throttle: { key: 'as-given', windowMs: 3_600_000 } } },
    { how: 'debounce', options: { debounce: { key: 'as-given', windowMs: 3_600_000 } } },
  ])('$how: the job stored returns the payload as given; a later enqueue returns it as stored', async ({ options }) => {
    const given = { bytes: new Uint8Array([1, 2]), gone: undefined };
    const job = await app.jobs.enqueue('echo', given, options);
    expect(job.payload).toBe(given);
    const stored = { bytes: Buffer.from([1, 2]) };
    expect((await app.jobs.findById(job.id))?.payload).toStrictEqual(stored);
    const again = await app.jobs.enqueue('echo', { bytes: new Uint8Array([3]) }, options);
    expect(again.id).toBe(job.id);
    // A throttle returns the window's job as stored; a debounce, the job with the new payload, as stored.
    const expected = 'throttle' in options ? stored : { bytes: Buffer.from([3]) };
    expect(again.payload).toStrictEqual(expected);
    await app.jobs.cancel(job.id);
  });

  it('drops undefined and symbol-keyed object entries (as JSON does); undefined array items become null', async () => {
    const sent = { kept: 1, gone: undefined, list: [1, undefined], [Symbol('meta')]: 'x' };
    const payload = (await runEcho(sent)) as Record<string | symbol, unknown>;
    expect(Object.getOwnPropertySymbols(payload)).toEqual([]);
    expect(Object.keys(payload)).toEqual(['kept', 'list']);
    expect(payload.list).toEqual([1, null]);
  });
});
