import type { OnModuleDestroy } from '@nestjs/common';
import type { Attributes, Context, Counter, Histogram, Link, Span, Tracer } from '@opentelemetry/api';
import type { ClaimedRow } from '../model/claimed-job.js';
import { errorInfo } from '../model/error-info.js';
import { JobCancelledError } from '../model/errors/job-cancelled.error.js';
import { JobTimeoutError } from '../model/errors/job-timeout.error.js';
import { LeaseLostError } from '../model/errors/lease-lost.error.js';
import { WorkerShutdownError } from '../model/errors/worker-shutdown.error.js';
import type { ExecutionOutcome } from '../model/execution-outcome.js';
import type { AttemptTelemetry, JobsTelemetry } from '../model/jobs-telemetry.js';
import type { NewJobDocument } from '../model/new-job-document.js';
import type { JobReadStore } from '../persistence/job-read.store.js';
import { JobCountGauges } from './job-count-gauges.js';
import type { MetricLabels } from './metric-labels.js';
import type { OpenTelemetryApi } from './opentelemetry-api.loader.js';
import * as names from './telemetry-names.js';

/**
 * `JobsTelemetry` on the OpenTelemetry API: tracer and meter come from the globally registered providers (the
 * API's no-op ones until the app registers an SDK). Spans follow the messaging conventions with the job name as
 * destination; metrics label it (and `error.type`) through `MetricLabels`, so their series stay bounded; the
 * pending/running gauges are `JobCountGauges`.
 */
export class OpenTelemetryJobsTelemetry implements JobsTelemetry, OnModuleDestroy {
  private readonly tracer: Tracer;
  private readonly sent: Counter;
  private readonly consumed: Counter;
  private readonly processDuration: Histogram;
  private readonly attempts: Counter;
  private readonly queueWait: Histogram;
  private readonly renewals: Counter;
  private readonly losses: Counter;
  private readonly gauges: JobCountGauges;
  /** Attributes per label value (and per operation), built once: metrics are recorded per attempt. */
  private readonly nameAttributes = new Map<string, Attributes>();
  private readonly sendAttributes = new Map<string, Attributes>();
  private readonly processAttributes = new Map<string, Attributes>();

  constructor(
    private readonly api: OpenTelemetryApi,
    reads: Pick<JobReadStore, 'countByNameAndStatus'>,
    private readonly workerId: string,
    metricsIntervalMs: number,
    private readonly labels: MetricLabels,
  ) {
    this.tracer = api.trace.getTracer(names.INSTRUMENTATION_SCOPE);
    const meter = api.metrics.getMeter(names.INSTRUMENTATION_SCOPE);
    this.gauges = new JobCountGauges(
      meter,
      reads,
      metricsIntervalMs,
      (name) => labels.jobName(name),
      (label) => this.attributesOf(label),
    );
    const durationAdvice = { advice: { explicitBucketBoundaries: names.DURATION_BUCKETS_S } };
    this.sent = meter.createCounter(names.METRIC_SENT_MESSAGES, {
      unit: '{message}',
      description: 'Jobs the producer attempted to enqueue.',
    });
    this.consumed = meter.createCounter(names.METRIC_CONSUMED_MESSAGES, {
      unit: '{message}',
      description: 'Attempts handed to a handler (claimed jobs).',
    });
    this.processDuration = meter.createHistogram(names.METRIC_PROCESS_DURATION, {
      unit: 's',
      description: 'Duration of an attempt, from claim to its outcome written.',
      ...durationAdvice,
    });
    this.attempts = meter.createCounter(names.METRIC_ATTEMPTS, {
      unit: '{attempt}',
      description: 'Attempts finished, by job name and outcome.',
    });
    this.queueWait = meter.createHistogram(names.METRIC_QUEUE_WAIT, {
      unit: 's',
      description: 'Time from when a job was due (runAt) to the start of its attempt.',
      ...durationAdvice,
    });
    this.renewals = meter.createCounter(names.METRIC_LEASE_RENEWALS, {
      unit: '{renewal}',
      description: 'Lease renewal writes that landed.',
    });
    this.losses = meter.createCounter(names.METRIC_LEASE_LOSSES, {
      unit: '{lease}',
      description:
        "Leases this worker lost: a running job's, or a claim's answered after its lease whose row another worker took before it ran.",
    });
  }

  onModuleDestroy(): void {
    this.gauges.close();
  }

  async traceSend<T>(
    docs: readonly NewJobDocument[],
    send: () => Promise<T>,
    stored: (result: T, index: number) => boolean,
  ): Promise<T> {
    const { api } = this;
    const first = docs[0];
    const oneName = docs.every((doc) => doc.name === first.name);
    const attributes: Attributes = {
      [names.ATTR_MESSAGING_SYSTEM]: names.MESSAGING_SYSTEM_VALUE,
      [names.ATTR_MESSAGING_OPERATION_TYPE]: names.OPERATION_SEND,
      [names.ATTR_MESSAGING_OPERATION_NAME]: names.OPERATION_SEND,
      [names.ATTR_MESSAGING_CLIENT_ID]: this.workerId,
    };
    if (oneName) attributes[names.ATTR_MESSAGING_DESTINATION_NAME] = first.name;
    if (docs.length === 1) attributes[names.ATTR_MESSAGING_MESSAGE_ID] = first._id.toHexString();
    else attributes[names.ATTR_MESSAGING_BATCH_MESSAGE_COUNT] = docs.length;
    const parent = api.context.active();
    const span = this.tracer.startSpan(
      oneName ? `${names.OPERATION_SEND} ${first.name}` : names.OPERATION_SEND,
      { kind: api.SpanKind.PRODUCER, attributes },
      parent,
    );
    const spanContext = api.trace.setSpan(parent, span);
    const carrier = injectedCarrier(api, spanContext);
    // One carrier for the batch: every job of it was created by this span.
    if (carrier) for (const doc of docs) doc.traceContext = carrier;
    try {
      const result = await api.context.with(spanContext, send);
      // A job that was not stored (its dedupe key or its cron tick taken already) is no message sent.
      let duplicates = 0;
      for (const [index, doc] of docs.entries()) {
        if (stored(result, index)) this.sent.add(1, this.sendAttributesOf(doc.name));
        else duplicates += 1;
      }
      if (duplicates > 0) span.setAttribute(names.ATTR_DEDUPLICATED, duplicates);
      return result;
    } catch (error) {
      const errorType = failSpan(api, span, error);
      for (const doc of docs) {
        this.sent.add(1, {
          ...this.sendAttributesOf(doc.name),
          [names.ATTR_ERROR_TYPE]: this.labels.errorType(errorType),
        });
      }
      throw error;
    } finally {
      span.end();
    }
  }

  startAttempt(doc: ClaimedRow, jobId: string, attempt: number): AttemptTelemetry {
    const { api } = this;
    const parent = storedContext(api, doc.traceContext);
    const producer = api.trace.getSpanContext(parent);
    const links: Link[] | undefined = producer ? [{ context: producer }] : undefined;
    const span = this.tracer.startSpan(
      `${names.OPERATION_PROCESS} ${doc.name}`,
      {
        kind: api.SpanKind.CONSUMER,
        links,
        attributes: {
          [names.ATTR_MESSAGING_SYSTEM]: names.MESSAGING_SYSTEM_VALUE,
          [names.ATTR_MESSAGING_DESTINATION_NAME]: doc.name,
          [names.ATTR_MESSAGING_OPERATION_TYPE]: names.OPERATION_PROCESS,
          [names.ATTR_MESSAGING_OPERATION_NAME]: names.OPERATION_PROCESS,
          [names.ATTR_MESSAGING_MESSAGE_ID]: jobId,
          [names.ATTR_MESSAGING_CLIENT_ID]: this.workerId,
          [names.ATTR_JOB_ATTEMPT]: attempt,
        },
      },
      parent,
    );
    const startedAt = performance.now();
    const nameAttributes = this.attributesOf(doc.name);
    const processAttributes = this.processAttributesOf(doc.name);
    this.consumed.add(1, processAttributes);
    const dueAt = doc.runAt instanceof Date ? doc.runAt.getTime() : Number.NaN;
    if (Number.isFinite(dueAt)) this.queueWait.record(Math.max(0, Date.now() - dueAt) / 1000, nameAttributes);
    return {
      run: async (work) => {
        const outcome = await api.context.with(api.trace.setSpan(parent, span), work);
        try {
          this.endAttempt(span, outcome, nameAttributes, processAttributes, (performance.now() - startedAt) / 1000);
        } catch {
          // Telemetry never changes what a job did: the outcome is written already, the span just ends.
        } finally {
          span.end();
        }
        return outcome;
      },
      aborted: (reason) =>
        span.addEvent(names.EVENT_ABORTED, {
          [names.ATTR_ABORT_REASON]: abortReason(reason),
          [names.ATTR_EXCEPTION_MESSAGE]: reason.message,
        }),
    };
  }

  leaseRenewed(name: string): void {
    this.renewals.add(1, this.attributesOf(name));
  }

  leaseLost(name: string): void {
    this.losses.add(1, this.attributesOf(name));
  }

  private endAttempt(
    span: Span,
    outcome: ExecutionOutcome,
    nameAttributes: Attributes,
    processAttributes: Attributes,
    seconds: number,
  ): void {
    let errorType: string | undefined;
    switch (outcome.kind) {
      case 'failed':
        errorType = failSpan(this.api, span, outcome.error);
        break;
      case 'stale':
      case 'abandoned': {
        const error = outcome.kind === 'stale' ? outcome.error : outcome.reason;
        errorType = errorInfo(error).errorClass;
        span.setAttribute(names.ATTR_ERROR_TYPE, errorType);
        span.setStatus({ code: this.api.SpanStatusCode.ERROR, message: error.message });
        break;
      }
      case 'shutdown':
        span.addEvent(names.EVENT_RELEASED);
        break;
      case 'succeeded':
      case 'cancelled':
      case 'not_started':
        break;
    }
    this.attempts.add(1, { ...nameAttributes, [names.ATTR_OUTCOME]: outcome.kind });
    this.processDuration.record(
      seconds,
      errorType === undefined
        ? processAttributes
        : { ...processAttributes, [names.ATTR_ERROR_TYPE]: this.labels.errorType(errorType) },
    );
  }

  /** Metric attributes of a job name: cached by label, so the caches are as bounded as the labels. */
  private attributesOf(name: string): Attributes {
    const label = this.labels.jobName(name);
    return cached(this.nameAttributes, label, () => ({
      [names.ATTR_MESSAGING_SYSTEM]: names.MESSAGING_SYSTEM_VALUE,
      [names.ATTR_MESSAGING_DESTINATION_NAME]: label,
    }));
  }

  /** The conventions require `messaging.operation.name` on the messaging metrics. */
  private sendAttributesOf(name: string): Attributes {
    return cached(this.sendAttributes, this.labels.jobName(name), () => ({
      ...this.attributesOf(name),
      [names.ATTR_MESSAGING_OPERATION_NAME]: names.OPERATION_SEND,
    }));
  }

  private processAttributesOf(name: string): Attributes {
    return cached(this.processAttributes, this.labels.jobName(name), () => ({
      ...this.attributesOf(name),
      [names.ATTR_MESSAGING_OPERATION_NAME]: names.OPERATION_PROCESS,
    }));
  }
}

/**
 * The stored producer context, or the root context when the job carries none (enqueued without telemetry) or one
 * the app's propagator cannot read: a row anyone may have written must never stop the job from running.
 */
function storedContext(api: OpenTelemetryApi, traceContext: unknown): Context {
  if (traceContext === null || typeof traceContext !== 'object' || Array.isArray(traceContext)) return api.ROOT_CONTEXT;
  try {
    return api.propagation.extract(api.ROOT_CONTEXT, traceContext);
  } catch {
    return api.ROOT_CONTEXT;
  }
}

/** The context the app's propagator writes for `spanContext`, or undefined when it writes none (or throws). */
function injectedCarrier(api: OpenTelemetryApi, spanContext: Context): Record<string, string> | undefined {
  const carrier: Record<string, string> = {};
  try {
    api.propagation.inject(spanContext, carrier);
  } catch {
    return undefined; // the job is enqueued all the same, just without a context to continue
  }
  return Object.keys(carrier).length > 0 ? carrier : undefined;
}

function cached(attributes: Map<string, Attributes>, name: string, build: () => Attributes): Attributes {
  let found = attributes.get(name);
  if (!found) {
    found = build();
    attributes.set(name, found);
  }
  return found;
}

/**
 * Exception event, status ERROR and `error.type` on `span`; returns the error type. Recorded from `errorInfo`, not
 * from the thrown value: that is bounded and never throws (a handler may throw anything, throwing getters included).
 */
function failSpan(api: OpenTelemetryApi, span: Span, error: unknown): string {
  const { message, errorClass, stack } = errorInfo(error);
  span.recordException({ name: errorClass, message, stack });
  span.setAttribute(names.ATTR_ERROR_TYPE, errorClass);
  span.setStatus({ code: api.SpanStatusCode.ERROR, message });
  return errorClass;
}

function abortReason(reason: Error): string {
  if (reason instanceof LeaseLostError) return 'lease_lost';
  if (reason instanceof JobTimeoutError) return 'timeout';
  if (reason instanceof JobCancelledError) return 'cancelled';
  if (reason instanceof WorkerShutdownError) return 'shutdown';
  return errorInfo(reason).errorClass;
}
