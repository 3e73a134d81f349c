import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { Types } from 'mongoose';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { countOf, type OtelTestSdk, registerOtelTestSdk, sumOf } from '../support/otel-test-sdk';
import { uniqueDatabaseName } from '../support/test-database';

const handlerSpans: { traceId: string; spanId: string; parentSpanId: string | undefined }[] = [];
const flakyCalls = new Map<string, number>();

@Injectable()
class TracedHandlers {
  @JobHandler('traced')
  traced() {
    const tracer = trace.getTracer('telemetry-spec');
    const span = tracer.startSpan('inside the handler');
    handlerSpans.push({
      traceId: span.spanContext().traceId,
      spanId: span.spanContext().spanId,
      parentSpanId: trace.getActiveSpan()?.spanContext().spanId,
    });
    span.end();
  }

  @JobHandler('flaky', { maxAttempts: 2, backoff: { baseMs: 5, maxMs: 5 } })
  flaky(_payload: unknown, ctx: JobExecutionContext) {
    flakyCalls.set(ctx.jobId, (flakyCalls.get(ctx.jobId) ?? 0) + 1);
    if (ctx.attempt === 1) throw new Error('first attempt fails');
  }

  @JobHandler('untraced')
  untraced() {}

  @JobHandler('later')
  later() {}
}

const PRODUCER_WORKER = 'producer-a';
const CONSUMER_WORKER = 'consumer-b';

describe('OpenTelemetry traces and metrics (producer app A, worker app B, one collection)', () => {
  let sdk: OtelTestSdk;
  let producer: JobsTestApp;
  let consumer: JobsTestApp;

  beforeAll(async () => {
    sdk = registerOtelTestSdk();
    const dbName = uniqueDatabaseName('telemetry');
    producer = await createJobsTestApp({
      dbName,
      options: { worker: false, workerId: PRODUCER_WORKER },
      providers: [TracedHandlers],
    });
    consumer = await createJobsTestApp({
      dbName,
      options: { workerId: CONSUMER_WORKER, telemetry: { metricsIntervalMs: 60_000 } },
      providers: [TracedHandlers],
    });
  });

  afterAll(async () => {
    await consumer?.close();
    await producer?.close();
    await sdk?.shutdown();
  });

  const spansOf = (name: string) => sdk.spans().filter((span) => span.name === name);
  const completed = (id: string) => async () => (await consumer.jobs.findById(id))?.status === 'completed';

  it('puts the producer span (app A) and the consumer span (app B) in one trace, the handler span under it', async () => {
    const request = trace.getTracer('telemetry-spec').startSpan('incoming request');
    const job = await context.with(trace.setSpan(context.active(), request), () =>
      producer.jobs.enqueue('traced', { hello: 'world' }),
    );
    request.end();
    await waitFor(completed(job.id), 'the traced job to complete');
    await waitFor(() => spansOf('process traced').length === 1, 'the consumer span to end');

    const [send] = spansOf('send traced');
    const [process] = spansOf('process traced');
    expect(send).toBeDefined();
    expect(send.kind).toBe(SpanKind.PRODUCER);
    expect(send.spanContext().traceId).toBe(request.spanContext().traceId);
    expect(send.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(send.attributes).toMatchObject({
      'messaging.system': 'nestjs_mongo_jobs',
      'messaging.destination.name': 'traced',
      'messaging.operation.type': 'send',
      'messaging.operation.name': 'send',
      'messaging.message.id': job.id,
      'messaging.client.id': PRODUCER_WORKER,
    });

    expect(process.kind).toBe(SpanKind.CONSUMER);
    expect(process.spanContext().traceId).toBe(send.spanContext().traceId);
    expect(process.parentSpanContext?.spanId).toBe(send.spanContext().spanId);
    expect(process.links.map((link) => link.context.spanId)).toEqual([send.spanContext().spanId]);
    expect(process.attributes).toMatchObject({
      'messaging.system': 'nestjs_mongo_jobs',
      'messaging.destination.name': 'traced',
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.message.id': job.id,
      'messaging.client.id': CONSUMER_WORKER,
      'nestjs_mongo_jobs.job.attempt': 1,
    });
    expect(process.status.code).toBe(SpanStatusCode.UNSET);

    expect(handlerSpans).toEqual([
      { traceId: send.spanContext().traceId, spanId: expect.any(String), parentSpanId: process.spanContext().spanId },
    ]);
    const [inside] = spansOf('inside the handler');
    expect(inside.parentSpanContext?.spanId).toBe(process.spanContext().spanId);

    // The context is a small field of its own, never part of the payload.
    const stored = await consumer.connection.db?.collection('jobs').findOne({ _id: new Types.ObjectId(job.id) });
    expect(stored?.payload).toEqual({ hello: 'world' });
    expect(stored?.traceContext).toEqual({
      traceparent: `00-${send.spanContext().traceId}-${send.spanContext().spanId}-01`,
    });
  });

  it('gives a failing-then-succeeding job two consumer spans, the first ERROR with the exception', async () => {
    const job = await producer.jobs.enqueue('flaky', {});
    await waitFor(completed(job.id), 'the flaky job to complete on its second attempt');
    await waitFor(() => spansOf('process flaky').length === 2, 'both consumer spans to end');

    const [send] = spansOf('send flaky');
    const [first, second] = spansOf('process flaky').sort(
      (a, b) =>
        Number(a.attributes['nestjs_mongo_jobs.job.attempt']) - Number(b.attributes['nestjs_mongo_jobs.job.attempt']),
    );
    for (const attempt of [first, second]) {
      expect(attempt.spanContext().traceId).toBe(send.spanContext().traceId);
      expect(attempt.parentSpanContext?.spanId).toBe(send.spanContext().spanId);
    }
    expect(first.attributes['nestjs_mongo_jobs.job.attempt']).toBe(1);
    expect(first.status).toEqual({ code: SpanStatusCode.ERROR, message: 'first attempt fails' });
    expect(first.attributes['error.type']).toBe('Error');
    const exception = first.events.find((event) => event.name === 'exception');
    expect(exception?.attributes?.['exception.message']).toBe('first attempt fails');
    expect(second.attributes['nestjs_mongo_jobs.job.attempt']).toBe(2);
    expect(second.status.code).toBe(SpanStatusCode.UNSET);
    expect(second.events.some((event) => event.name === 'exception')).toBe(false);
  });

  it('traces enqueueMany as one send span with the batch size, whose context every job carries', async () => {
    const [a, b] = await producer.jobs.enqueueMany([
      { name: 'untraced', payload: 1 },
      { name: 'untraced', payload: 2 },
    ]);
    await waitFor(async () => (await completed(a.id)()) && (await completed(b.id)()), 'both batch jobs to complete');
    await waitFor(() => spansOf('process untraced').length === 2, 'both consumer spans to end');
    const [send] = spansOf('send untraced');
    expect(send.attributes['messaging.batch.message_count']).toBe(2);
    expect(send.attributes['messaging.message.id']).toBeUndefined();
    for (const process of spansOf('process untraced')) {
      expect(process.parentSpanContext?.spanId).toBe(send.spanContext().spanId);
    }
  });

  it('reports counters, the duration and wait histograms, and pending/running gauges per name', async () => {
    await producer.jobs.enqueue('later', {}, { delayMs: 3_600_000 });
    const reads = jest.spyOn(consumer.stores.read, 'countByNameAndStatus');
    const metrics = await sdk.collect();
    const flaky = { 'messaging.destination.name': 'flaky' };
    expect(sumOf(metrics.get('messaging.client.sent.messages'), flaky)).toBe(1);
    expect(sumOf(metrics.get('messaging.client.sent.messages'), { 'messaging.destination.name': 'untraced' })).toBe(2);
    expect(sumOf(metrics.get('messaging.client.consumed.messages'), flaky)).toBe(2);
    expect(countOf(metrics.get('messaging.process.duration'), flaky)).toBe(2);
    expect(countOf(metrics.get('messaging.process.duration'), { ...flaky, 'error.type': 'Error' })).toBe(1);
    expect(countOf(metrics.get('nestjs_mongo_jobs.queue.wait'), flaky)).toBe(2);
    const attempts = metrics.get('nestjs_mongo_jobs.attempts');
    expect(sumOf(attempts, { ...flaky, 'nestjs_mongo_jobs.outcome': 'failed' })).toBe(1);
    expect(sumOf(attempts, { ...flaky, 'nestjs_mongo_jobs.outcome': 'succeeded' })).toBe(1);
    const later = { 'messaging.destination.name': 'later' };
    expect(sumOf(metrics.get('nestjs_mongo_jobs.jobs.pending'), later)).toBe(1);
    expect(sumOf(metrics.get('nestjs_mongo_jobs.jobs.running'), later)).toBe(0);

    // Within metricsIntervalMs the gauges report what the last read saw, without reading again.
    await producer.jobs.enqueue('later', {}, { delayMs: 3_600_000 });
    await sdk.collect();
    expect(reads).toHaveBeenCalledTimes(1);
    reads.mockRestore();
  });
});

describe('OpenTelemetry with telemetry: false', () => {
  let sdk: OtelTestSdk;
  let app: JobsTestApp;

  beforeAll(async () => {
    sdk = registerOtelTestSdk();
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('telemetry'),
      options: { telemetry: false },
      providers: [TracedHandlers],
    });
  });

  afterAll(async () => {
    await app?.close();
    await sdk?.shutdown();
  });

  it('emits no span, no metric and stores no trace context', async () => {
    const job = await app.jobs.enqueue('untraced', {});
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'the job to complete');
    expect(sdk.spans()).toEqual([]);
    const metrics = await sdk.collect();
    expect([...metrics.values()].filter((metric) => metric.dataPoints.length > 0)).toEqual([]);
    const stored = await app.connection.db?.collection('jobs').findOne({ _id: new Types.ObjectId(job.id) });
    expect(stored).not.toHaveProperty('traceContext');
  });
});
