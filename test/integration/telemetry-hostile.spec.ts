import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { propagation, SpanKind, SpanStatusCode, type TextMapPropagator, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { Types } from 'mongoose';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { JobEnqueuer } from '../../lib/enqueue/job-enqueuer.service';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { type OtelTestSdk, pointsOf, registerOtelTestSdk, sumOf } from '../support/otel-test-sdk';
import { sleep } from '../support/sleep';
import { uniqueDatabaseName } from '../support/test-database';

/** The span active in the handler after each of several awaits. */
const activeInHandler: (string | undefined)[][] = [];

/** An Error whose `stack` getter throws and whose message is huge: what a hostile library might throw. */
function hostileError(): Error {
  const error = new Error('x'.repeat(200_000));
  Object.defineProperty(error, 'stack', {
    get() {
      throw new Error('stack getter throws');
    },
  });
  return error;
}

@Injectable()
class HostileHandlers {
  @JobHandler('hostile', { maxAttempts: 1 })
  hostile() {
    throw hostileError();
  }

  @JobHandler('awaits')
  async awaits() {
    const seen: (string | undefined)[] = [];
    for (let step = 0; step < 3; step += 1) {
      await new Promise((resolve) => setImmediate(resolve));
      seen.push(trace.getActiveSpan()?.spanContext().spanId);
    }
    activeInHandler.push(seen);
  }

  @JobHandler('gauged')
  gauged() {}
}

/** Per job id: its consumer span, and the span active when each of its lease renewals was reported. */
const renewalSpans = new Map<string, { own?: string; atRenewal: (string | undefined)[] }>();

@Injectable()
class RenewingHandlers {
  @JobHandler('renewing', { concurrency: 2 })
  async renewing(_payload: unknown, ctx: JobExecutionContext) {
    const entry = renewalSpans.get(ctx.jobId) ?? { atRenewal: [] };
    entry.own = trace.getActiveSpan()?.spanContext().spanId;
    renewalSpans.set(ctx.jobId, entry);
    await waitFor(
      () => [...renewalSpans.values()].filter((seen) => seen.atRenewal.length >= 2).length >= 2,
      'both jobs to renew their lease twice',
    );
  }
}

/** A propagator written by someone else, with a bug: it throws on every call. */
const throwingPropagator: TextMapPropagator = {
  inject: () => {
    throw new Error('inject bug');
  },
  extract: () => {
    throw new Error('extract bug');
  },
  fields: () => ['traceparent'],
};

describe('OpenTelemetry against hostile inputs', () => {
  let sdk: OtelTestSdk;
  let app: JobsTestApp;

  beforeAll(async () => {
    sdk = registerOtelTestSdk();
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('telemetry_hostile'),
      // No poll loop: every job runs through runNow, the path a request handler takes.
      options: { worker: false, telemetry: { metricsIntervalMs: 1 } },
      providers: [HostileHandlers],
    });
  });

  afterEach(() => {
    propagation.disable();
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  });

  afterAll(async () => {
    await app?.close();
    await sdk?.shutdown();
  });

  const spansOf = (name: string) => sdk.spans().filter((span) => span.name === name);
  const rows = () => app.connection.db?.collection('jobs');

  it('ends the consumer span of a handler that throws an Error with a throwing stack getter, bounded', async () => {
    const job = await app.jobs.enqueue('hostile', {});
    const outcome = await app.jobs.runNow(job.id);
    expect(outcome.kind).toBe('executed');
    const [span] = spansOf('process hostile');
    expect(span?.status.code).toBe(SpanStatusCode.ERROR);
    const exception = span.events.find((event) => event.name === 'exception');
    expect(String(exception?.attributes?.['exception.message']).length).toBeLessThanOrEqual(2048);
    expect(span.status.message?.length).toBeLessThanOrEqual(2048);
  });

  it('runs a job whose stored traceContext is garbage as a root span, the handler under it after each await', async () => {
    const garbage: unknown[] = [
      'x'.repeat(1_000_000),
      42,
      [1, 2, 3],
      { traceparent: 42 },
      { traceparent: ['00-zz'], tracestate: { $gt: 1 } },
      { traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`, tracestate: 'k=v,'.repeat(200_000) },
    ];
    for (const traceContext of garbage) {
      const job = await app.jobs.enqueue('awaits', {});
      await rows()?.updateOne({ _id: new Types.ObjectId(job.id) }, { $set: { traceContext } });
      const outcome = await app.jobs.runNow(job.id);
      expect(outcome).toMatchObject({ kind: 'executed', job: { status: 'completed' } });
    }
    const spans = spansOf('process awaits');
    expect(spans).toHaveLength(garbage.length);
    for (const [index, span] of spans.entries()) {
      expect(span.kind).toBe(SpanKind.CONSUMER);
      expect(activeInHandler[index]).toEqual([1, 2, 3].map(() => span.spanContext().spanId));
      // The traceparent-shaped one is honoured; its giant tracestate is not carried along.
      expect(span.spanContext().traceState?.serialize().length ?? 0).toBeLessThanOrEqual(512);
    }
    expect(spans.slice(0, -1).every((span) => span.parentSpanContext === undefined)).toBe(true);
  });

  it("keeps enqueueing and running jobs when the app's propagator throws", async () => {
    propagation.disable();
    propagation.setGlobalPropagator(throwingPropagator);
    const job = await app.jobs.enqueue('awaits', {});
    const outcome = await app.jobs.runNow(job.id);
    expect(outcome).toMatchObject({ kind: 'executed', job: { status: 'completed' } });
    expect(spansOf('send awaits').length).toBeGreaterThan(0);
  });

  it('reports messaging.operation.name on the messaging metrics, as the conventions require', async () => {
    const metrics = await sdk.collect();
    const awaits = { 'messaging.destination.name': 'awaits' };
    expect(sumOf(metrics.get('messaging.client.sent.messages'), awaits)).toBeGreaterThan(0);
    for (const [metric, operation] of [
      ['messaging.client.sent.messages', 'send'],
      ['messaging.client.consumed.messages', 'process'],
      ['messaging.process.duration', 'process'],
    ]) {
      const points = pointsOf(metrics.get(metric), awaits);
      expect(points.length).toBeGreaterThan(0);
      for (const point of points) expect(point.attributes['messaging.operation.name']).toBe(operation);
    }
  });

  it('reports a drained name once as 0, never its last count (then drops it: this SDK keeps exporting that 0)', async () => {
    const job = await app.jobs.enqueue('gauged', {}, { delayMs: 3_600_000 });
    const gauged = { 'messaging.destination.name': 'gauged' };
    expect(sumOf((await sdk.collect()).get('nestjs_mongo_jobs.jobs.pending'), gauged)).toBe(1);
    await app.jobs.cancel(job.id);
    // metricsIntervalMs is 1: a later collection reads the counts again.
    const values = async () =>
      pointsOf<number>((await sdk.collect()).get('nestjs_mongo_jobs.jobs.pending'), gauged).map((point) => point.value);
    await waitFor(async () => (await values()).join() === '0', 'the drained name to be reported as 0');
    expect(await values()).toEqual([0]);
  });

  it('counts a cron tick another instance already stored as no message sent', async () => {
    const enqueuer = app.get(JobEnqueuer);
    const tick = new Date(Date.UTC(2030, 0, 1));
    expect(await enqueuer.enqueueTick('gauged', tick)).toBe(true);
    expect(await enqueuer.enqueueTick('gauged', tick)).toBe(false); // another instance won this tick
    const metrics = await sdk.collect();
    const sent = metrics.get('messaging.client.sent.messages');
    // One job was stored for the tick, and one enqueue of it (by the test above) before.
    expect(sumOf(sent, { 'messaging.destination.name': 'gauged' })).toBe(2);
  });
});

describe('OpenTelemetry context of lease renewals shared between jobs', () => {
  let sdk: OtelTestSdk;
  let app: JobsTestApp;

  beforeAll(async () => {
    sdk = registerOtelTestSdk();
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('telemetry_renewals'),
      options: { concurrency: 2, leaseMs: 600 },
      providers: [RenewingHandlers],
    });
  });

  afterAll(async () => {
    await app?.close();
    await sdk?.shutdown();
  });

  it("renews each job's lease outside any other job's span (shared heartbeat timers start no context)", async () => {
    const subscription = app.jobs.events$.subscribe((event) => {
      if (event.type !== 'renewed') return;
      const entry = renewalSpans.get(event.jobId) ?? { atRenewal: [] };
      entry.atRenewal.push(trace.getActiveSpan()?.spanContext().spanId);
      renewalSpans.set(event.jobId, entry);
    });
    try {
      const [a, b] = await app.jobs.enqueueMany([
        { name: 'renewing', payload: 1 },
        { name: 'renewing', payload: 2 },
      ]);
      await waitFor(async () => {
        const done = await Promise.all([a, b].map(async (job) => (await app.jobs.findById(job.id))?.status));
        return done.every((status) => status === 'completed');
      }, 'both renewing jobs to complete');
    } finally {
      subscription.unsubscribe();
    }
    const owners = new Set([...renewalSpans.values()].map((entry) => entry.own));
    for (const entry of renewalSpans.values()) {
      // A renewal may run in no span, or in its own job's span; never in another job's.
      for (const spanId of entry.atRenewal) {
        if (spanId !== entry.own) expect(owners.has(spanId)).toBe(false);
      }
    }
  });
});

describe('OpenTelemetry gauges after the module closed', () => {
  it('reads no counts once the app is closed (its gauge callback is removed)', async () => {
    const sdk = registerOtelTestSdk();
    try {
      const app = await createJobsTestApp({
        dbName: uniqueDatabaseName('telemetry_closed'),
        options: { worker: false, telemetry: { metricsIntervalMs: 1 } },
      });
      const reads = jest.spyOn(app.stores.read, 'countByNameAndStatus');
      await sdk.collect();
      expect(reads).toHaveBeenCalledTimes(1);
      await app.close();
      await sleep(2);
      await sdk.collect();
      expect(reads).toHaveBeenCalledTimes(1);
    } finally {
      await sdk.shutdown();
    }
  });
});
