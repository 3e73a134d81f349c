import { context, metrics, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { ConsoleMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, ConsoleSpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';

/**
 * With `JOBS_SAMPLE_TELEMETRY=console`, registers an OpenTelemetry SDK that prints every span and, every 10 s, the
 * metrics to the console. It must run before the app is created: the jobs module picks up the registered providers
 * when it boots. A real app would use `@opentelemetry/sdk-node` instead (see docs/observability.md).
 * Returns a function that flushes and unregisters it.
 */
export function startSampleTelemetry(): () => Promise<void> {
  if (process.env.JOBS_SAMPLE_TELEMETRY !== 'console') return async () => undefined;
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(new ConsoleSpanExporter())],
  });
  const meterProvider = new MeterProvider({
    readers: [
      new PeriodicExportingMetricReader({ exporter: new ConsoleMetricExporter(), exportIntervalMillis: 10_000 }),
    ],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
  console.log('[telemetry] OpenTelemetry spans and metrics go to the console');
  return async () => {
    await Promise.all([tracerProvider.shutdown(), meterProvider.shutdown()]);
    trace.disable();
    metrics.disable();
    propagation.disable();
    context.disable();
  };
}
