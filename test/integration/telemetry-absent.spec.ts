import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Types } from 'mongoose';
import { importOptional } from '../../lib/telemetry/import-optional';
import type { JobsTestApp } from '../support/jobs-app';
import { type OtelTestSdk, registerOtelTestSdk } from '../support/otel-test-sdk';
import { uniqueDatabaseName } from '../support/test-database';

// The optional peer as an app without it installed sees it: its import fails, so the loader finds no API.
jest.unstable_mockModule('../../lib/telemetry/opentelemetry-api.loader', () => ({
  loadOpenTelemetryApi: () =>
    importOptional(() => Promise.reject(new Error("Cannot find module '@opentelemetry/api'"))),
}));

const { Injectable } = await import('@nestjs/common');
const { JobHandler } = await import('../../lib');
const { createJobsTestApp, waitFor } = await import('../support/jobs-app');

const runs: unknown[] = [];

@Injectable()
class PlainHandlers {
  @JobHandler('plain', { maxAttempts: 2, backoff: { baseMs: 5, maxMs: 5 } })
  plain(payload: { fail?: boolean }, ctx: { attempt: number }) {
    runs.push(payload);
    if (payload.fail && ctx.attempt === 1) throw new Error('once');
  }
}

describe('without @opentelemetry/api resolvable', () => {
  let sdk: OtelTestSdk;
  let app: JobsTestApp;

  beforeAll(async () => {
    sdk = registerOtelTestSdk(); // an SDK is registered, yet nothing reaches it: the library never found the API
    app = await createJobsTestApp({ dbName: uniqueDatabaseName('telemetry-absent'), providers: [PlainHandlers] });
  });

  afterAll(async () => {
    await app?.close();
    await sdk?.shutdown();
  });

  it('resolves the loader to null instead of failing', async () => {
    await expect(importOptional(() => Promise.reject(new Error('Cannot find module')))).resolves.toBeNull();
  });

  it('runs jobs (a retry included) as usual and emits nothing', async () => {
    const [ok, flaky] = await app.jobs.enqueueMany([
      { name: 'plain', payload: {} },
      { name: 'plain', payload: { fail: true } },
    ]);
    const done = async (id: string) => (await app.jobs.findById(id))?.status === 'completed';
    await waitFor(async () => (await done(ok.id)) && (await done(flaky.id)), 'both jobs to complete');
    expect(runs).toHaveLength(3);
    expect(sdk.spans()).toEqual([]);
    const metrics = await sdk.collect();
    expect([...metrics.values()].filter((metric) => metric.dataPoints.length > 0)).toEqual([]);
    const stored = await app.connection.db?.collection('jobs').findOne({ _id: new Types.ObjectId(ok.id) });
    expect(stored).not.toHaveProperty('traceContext');
  });
});
