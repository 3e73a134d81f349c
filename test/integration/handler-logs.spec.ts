import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { InvalidOptionError, type JobExecutionContext, JobHandler } from '../../lib';
import { LOG_FLUSH_LINES } from '../../lib/lease/log-buffer';
import { MAX_LOG_LINE_BYTES, MAX_LOG_LINES } from '../../lib/model/job-log';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

let release = deferred();
let thrown: unknown;

@Injectable()
class LoggingHandlers {
  /** Logs `lines` lines, then fails on its first `failFirst` attempts. */
  @JobHandler('chatty', { maxAttempts: 3, backoff: { baseMs: 10, maxMs: 10 } })
  async chatty(payload: { lines: number; failFirst?: number }, ctx: JobExecutionContext) {
    for (let i = 0; i < payload.lines; i++) ctx.log(`attempt ${ctx.attempt} line ${i}`);
    if (ctx.attempt <= (payload.failFirst ?? 0)) throw new Error(`attempt ${ctx.attempt} fails`);
  }

  /** Logs enough for a write of their own, then waits for the test. */
  @JobHandler('logs-then-waits')
  async logsThenWaits(_payload: unknown, ctx: JobExecutionContext) {
    for (let i = 0; i < LOG_FLUSH_LINES; i++) ctx.log(`early ${i}`);
    await release.promise;
    ctx.log('last');
  }

  @JobHandler('long-line')
  async longLine(payload: { text: string }, ctx: JobExecutionContext) {
    ctx.log(payload.text);
  }

  @JobHandler('bad-log')
  async badLog(_payload: unknown, ctx: JobExecutionContext) {
    try {
      ctx.log({ not: 'a string' } as unknown as string);
    } catch (error) {
      thrown = error;
    }
  }
}

describe('ctx.log: lines a handler logs, stored on the job', () => {
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    release.resolve();
    await Promise.all(apps.splice(0).map((app) => app.close()));
    release = deferred();
    thrown = undefined;
  });

  const start = async (label: string) => {
    const app = await createJobsTestApp({
      dbName: uniqueDatabaseName(label),
      options: { pollIntervalMs: 20 },
      providers: [LoggingHandlers],
    });
    apps.push(app);
    return app;
  };
  const finished = (app: JobsTestApp, id: string) =>
    waitFor(async () => ['completed', 'dead'].includes((await app.jobs.findById(id))?.status ?? ''), 'the job to end');

  it('keeps every attempt’s lines, in order, each with its time and attempt, through a retry', async () => {
    const app = await start('logs_retry');
    const before = Date.now();
    const job = await app.jobs.enqueue('chatty', { lines: 3, failFirst: 1 });
    await finished(app, job.id);
    const row = await app.jobs.findById(job.id);
    expect(row).toMatchObject({ status: 'completed', logsTruncated: false });
    expect(row?.logs.map((line) => [line.attempt, line.message])).toEqual([
      [1, 'attempt 1 line 0'],
      [1, 'attempt 1 line 1'],
      [1, 'attempt 1 line 2'],
      [2, 'attempt 2 line 0'],
      [2, 'attempt 2 line 1'],
      [2, 'attempt 2 line 2'],
    ]);
    for (const line of row?.logs ?? []) {
      expect(line.at).toBeInstanceOf(Date);
      expect(line.at.getTime()).toBeGreaterThanOrEqual(before - 1_000);
    }
  });

  it(`keeps the last ${MAX_LOG_LINES} lines across attempts and says older ones were dropped`, async () => {
    const app = await start('logs_bound');
    const job = await app.jobs.enqueue('chatty', { lines: 150, failFirst: 2 }); // 450 lines over 3 attempts
    await finished(app, job.id);
    const row = await app.jobs.findById(job.id);
    expect(row).toMatchObject({ status: 'completed', logsTruncated: true });
    expect(row?.logs).toHaveLength(MAX_LOG_LINES);
    expect(row?.logs[0].message).toBe('attempt 2 line 100');
    expect(row?.logs.at(-1)?.message).toBe('attempt 3 line 149');
    // The raw row: every line counted, the oldest dropped.
    const stored = await app.connection.collection('jobs').findOne({ name: 'chatty' });
    expect(stored?.logCount).toBe(450);
  });

  it(`shows a running job’s lines once ${LOG_FLUSH_LINES} wait, before it ends; the rest come with the outcome`, async () => {
    const app = await start('logs_running');
    const job = await app.jobs.enqueue('logs-then-waits', {});
    await waitFor(async () => ((await app.jobs.findById(job.id))?.logs.length ?? 0) >= LOG_FLUSH_LINES, 'the lines');
    expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'running' });
    release.resolve();
    await finished(app, job.id);
    const row = await app.jobs.findById(job.id);
    expect(row?.logs).toHaveLength(LOG_FLUSH_LINES + 1);
    expect(row?.logs.at(-1)?.message).toBe('last');
  });

  it(`cuts a line at ${MAX_LOG_LINE_BYTES} bytes of UTF-8, keeping characters whole`, async () => {
    const app = await start('logs_long');
    const job = await app.jobs.enqueue('long-line', { text: '€'.repeat(1_000) }); // 3 bytes each
    await finished(app, job.id);
    const [line] = (await app.jobs.findById(job.id))?.logs ?? [];
    expect(Buffer.byteLength(line.message)).toBeLessThanOrEqual(MAX_LOG_LINE_BYTES);
    expect(line.message.startsWith('€€€')).toBe(true);
    expect(line.message).toContain('[truncated, 1000 characters in all]');
  });

  it('refuses a message that is not a string with InvalidOptionError, storing nothing', async () => {
    const app = await start('logs_bad');
    const job = await app.jobs.enqueue('bad-log', {});
    await finished(app, job.id);
    expect(thrown).toBeInstanceOf(InvalidOptionError);
    expect(await app.jobs.findById(job.id)).toMatchObject({ status: 'completed', logs: [], logsTruncated: false });
  });

  it('reads a hand-written row’s malformed lines as dropped, never crashing', async () => {
    const app = await start('logs_malformed');
    const job = await app.jobs.enqueue('chatty', { lines: 0 }, { delayMs: 3_600_000 });
    const line = { at: new Date(), attempt: 1, message: 'kept' };
    await app.connection
      .collection('jobs')
      .updateOne({ name: 'chatty' }, { $set: { logs: [null, 'text', { message: 42 }, line] } });
    expect(await app.jobs.findById(job.id)).toMatchObject({ logs: [line], logsTruncated: true });
  });

  it('a job that logged nothing has no lines', async () => {
    const app = await start('logs_none');
    const job = await app.jobs.enqueue('chatty', { lines: 0 });
    await finished(app, job.id);
    expect(await app.jobs.findById(job.id)).toMatchObject({ logs: [], logsTruncated: false });
  });
});
