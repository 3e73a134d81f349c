import { context, metrics, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  MeterProvider,
  type MetricData,
  MetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

/** A reader that exports nothing on its own: tests call `collect()` when they want numbers. */
class CollectingReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

/** The OpenTelemetry SDK as an app would register it globally, with in-memory exporters. */
export interface OtelTestSdk {
  spans(): ReadableSpan[];
  /** Every metric collected now, by instrument name. */
  collect(): Promise<Map<string, MetricData>>;
  shutdown(): Promise<void>;
}

/**
 * `temporality: 'delta'` collects what was recorded since the last collection; with the default (cumulative), this SDK
 * also keeps exporting the last value of an observable series no longer observed.
 */
export function registerOtelTestSdk({
  temporality = 'cumulative',
}: {
  temporality?: 'cumulative' | 'delta';
} = {}): OtelTestSdk {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const reader = new CollectingReader(
    temporality === 'delta' ? { aggregationTemporalitySelector: () => AggregationTemporality.DELTA } : {},
  );
  const meterProvider = new MeterProvider({ readers: [reader] });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
  return {
    spans: () => exporter.getFinishedSpans(),
    collect: async () => {
      const { resourceMetrics } = await reader.collect();
      const byName = new Map<string, MetricData>();
      for (const scope of resourceMetrics.scopeMetrics)
        for (const metric of scope.metrics) byName.set(metric.descriptor.name, metric);
      return byName;
    },
    shutdown: async () => {
      await tracerProvider.shutdown();
      await meterProvider.shutdown();
      disableOtelGlobals();
    },
  };
}

/** Unregisters every global the API holds, so the next test file (or test) starts from none. */
export function disableOtelGlobals(): void {
  trace.disable();
  metrics.disable();
  context.disable();
  propagation.disable();
}

/** The data points of `metric` whose attributes include `attributes`. */
export function pointsOf<T>(metric: MetricData | undefined, attributes: Record<string, unknown>): DataPoint<T>[] {
  if (!metric) return [];
  return (metric.dataPoints as DataPoint<T>[]).filter((point) =>
    Object.entries(attributes).every(([key, value]) => point.attributes[key] === value),
  );
}

/** Sum of a counter's (or gauge's) points matching `attributes`. */
export function sumOf(metric: MetricData | undefined, attributes: Record<string, unknown>): number {
  return pointsOf<number>(metric, attributes).reduce((sum, point) => sum + point.value, 0);
}

/** Observations of a histogram's points matching `attributes`. */
export function countOf(metric: MetricData | undefined, attributes: Record<string, unknown>): number {
  return pointsOf<Histogram>(metric, attributes).reduce((sum, point) => sum + point.value.count, 0);
}
