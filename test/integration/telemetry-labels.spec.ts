import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { type JobExecutionContext, JobHandler, UnrecoverableJobError } from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { countOf, type OtelTestSdk, pointsOf, registerOtelTestSdk, sumOf } from '../support/otel-test-sdk';
import { uniqueDatabaseName } from '../support/test-database';

/** A class of the app's own: its name is not one telemetry knows, so it is reported as `_other`. */
class TenantQuotaExceededError extends Error {
  override name = 'TenantQuotaExceededError';
}

const THROWN: Record<string, () => Error> = {
  custom: () => new TenantQuotaExceededError('tenant 42 is over its quota'),
  type: () => new TypeError('x is not a function'),
  library: () => new UnrecoverableJobError('bad payload'),
};

@Injectable()
class LabelHandlers {
  @JobHandler('real.sync')
  sync() {}

  @JobHandler('real.fails', { maxAttempts: 1 })
  fails(payload: { throw: string }, _ctx: JobExecutionContext) {
    throw THROWN[payload.throw]();
  }
}

const PENDING = 'nestjs_mongo_jobs.jobs.pending';
const RUNNING = 'nestjs_mongo_jobs.jobs.running';
const DESTINATION = 'messaging.destination.name';
const HOUR_MS = 3_600_000;

describe('OpenTelemetry label values bounded (3,000 run-time names from another app)', () => {
  let sdk: OtelTestSdk;
  let worker: JobsTestApp;
  let other: JobsTestApp;

  beforeAll(async () => {
    sdk = registerOtelTestSdk();
    const dbName = uniqueDatabaseName('telemetry_labels');
    worker = await createJobsTestApp({
      dbName,
      // No poll loop: jobs run through runNow; the gauges read the counts at every collection.
      options: { worker: false, telemetry: { metricsIntervalMs: 1, extraJobNames: ['listed.report'] } },
      providers: [LabelHandlers],
    });
    // Another app on the same collection, without telemetry: its rows reach this app's gauges only.
    other = await createJobsTestApp({ dbName, options: { worker: false, telemetry: false } });
    for (let offset = 0; offset < 3_000; offset += 500) {
      const items = Array.from({ length: 500 }, (_, i) => ({
        name: `tenant.${offset + i}.sync`,
        payload: {},
        options: { delayMs: HOUR_MS, strict: false },
      }));
      await other.jobs.enqueueMany(items);
    }
  });

  afterAll(async () => {
    await other?.close();
    await worker?.close();
    await sdk?.shutdown();
  });

  const gauge = async (metric: string) => (await sdk.collect()).get(metric);

  it("keeps a handled name's own gauge, folds every unknown name into _other, and bounds the series", async () => {
    await worker.jobs.enqueue('real.sync', {}, { delayMs: HOUR_MS });
    await worker.jobs.enqueue('real.sync', {}, { delayMs: HOUR_MS });
    await worker.jobs.enqueue('listed.report', {}, { delayMs: HOUR_MS, strict: false });
    const pending = await gauge(PENDING);
    // real.sync, listed.report, _other: never one series per name.
    expect(pending?.dataPoints.length).toBe(3);
    expect(sumOf(pending, { [DESTINATION]: 'real.sync' })).toBe(2);
    expect(sumOf(pending, { [DESTINATION]: 'listed.report' })).toBe(1);
    expect(sumOf(pending, { [DESTINATION]: '_other' })).toBe(3_000);
    expect(pointsOf(pending, { [DESTINATION]: 'tenant.7.sync' })).toEqual([]);
    expect((await gauge(RUNNING))?.dataPoints.length).toBe(3);
  });

  it('labels what this app sends under a name it neither handles nor lists as _other', async () => {
    await worker.jobs.enqueue('tenant.adhoc.sync', {}, { delayMs: HOUR_MS, strict: false });
    const sent = (await sdk.collect()).get('messaging.client.sent.messages');
    expect(sumOf(sent, { [DESTINATION]: '_other' })).toBe(1);
    expect(pointsOf(sent, { [DESTINATION]: 'tenant.adhoc.sync' })).toEqual([]);
    expect(sumOf(sent, { [DESTINATION]: 'real.sync' })).toBe(2);
  });

  it('reports a name whose last row is gone as 0, never its last count (this SDK keeps exporting a dropped series)', async () => {
    const listed = await worker.jobs.list({ name: 'listed.report' });
    await worker.jobs.cancel(listed.jobs[0].id);
    // This SDK (cumulative) keeps exporting the last value of a series no longer observed: it must be that 0.
    await waitFor(
      async () => sumOf(await gauge(PENDING), { [DESTINATION]: 'listed.report' }) === 0,
      'listed.report to be reported as 0 pending',
    );
    expect(pointsOf<number>(await gauge(PENDING), { [DESTINATION]: 'listed.report' }).map((p) => p.value)).toEqual([0]);
    // real.sync still has rows: it stays, with its count.
    expect(sumOf(await gauge(PENDING), { [DESTINATION]: 'real.sync' })).toBe(2);
  });

  it('reports error.type as the class for built-in and library errors, and _other for an app-defined one', async () => {
    for (const kind of Object.keys(THROWN)) {
      const job = await worker.jobs.enqueue('real.fails', { throw: kind });
      expect((await worker.jobs.runNow(job.id)).kind).toBe('executed');
    }
    const duration = (await sdk.collect()).get('messaging.process.duration');
    const failed = { [DESTINATION]: 'real.fails' };
    expect(countOf(duration, { ...failed, 'error.type': 'TypeError' })).toBe(1);
    expect(countOf(duration, { ...failed, 'error.type': 'UnrecoverableJobError' })).toBe(1);
    expect(countOf(duration, { ...failed, 'error.type': '_other' })).toBe(1);
    expect(countOf(duration, { ...failed, 'error.type': 'TenantQuotaExceededError' })).toBe(0);
    // The stored error keeps the real class: only the metric label is bounded.
    const dead = await worker.jobs.list({ name: 'real.fails', status: 'dead' });
    expect(dead.jobs.flatMap((job) => job.attempts.map((attempt) => attempt.errorClass))).toContain(
      'TenantQuotaExceededError',
    );
  });
});

describe('OpenTelemetry gauges forget a name with no row left (delta temporality: only what was observed)', () => {
  let sdk: OtelTestSdk;
  let app: JobsTestApp;

  beforeAll(async () => {
    sdk = registerOtelTestSdk({ temporality: 'delta' });
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('telemetry_labels_delta'),
      options: { worker: false, telemetry: { metricsIntervalMs: 1 } },
      providers: [LabelHandlers],
    });
  });

  afterAll(async () => {
    await app?.close();
    await sdk?.shutdown();
  });

  it('reports it as 0 at the first read that finds no row, and not at all after', async () => {
    const job = await app.jobs.enqueue('real.sync', {}, { delayMs: HOUR_MS });
    const pendingValues = async () =>
      pointsOf<number>((await sdk.collect()).get(PENDING), { [DESTINATION]: 'real.sync' }).map((p) => p.value);
    expect(await pendingValues()).toEqual([1]);
    await app.jobs.cancel(job.id);
    // The next read (metricsIntervalMs is 1) sees no row: 0 once, then the series is gone.
    await waitFor(async () => (await pendingValues()).join() === '0', 'real.sync reported as 0 pending');
    await waitFor(async () => (await pendingValues()).length === 0, 'real.sync to leave the pending gauge');
    expect(await pendingValues()).toEqual([]);
    expect(pointsOf((await sdk.collect()).get(RUNNING), { [DESTINATION]: 'real.sync' })).toEqual([]);
  });
});
