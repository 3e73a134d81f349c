import type { Provider } from '@nestjs/common';
import { JobHandlerRegistry } from '../handlers/job-handler.registry.js';
import { JOBS_RESOLVED_OPTIONS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { JOBS_TELEMETRY, type JobsTelemetry } from '../model/jobs-telemetry.js';
import { JobReadStore } from '../persistence/job-read.store.js';
import { MetricLabels } from './metric-labels.js';
import { OpenTelemetryJobsTelemetry } from './open-telemetry-jobs-telemetry.js';
import { loadOpenTelemetryApi } from './opentelemetry-api.loader.js';

/** `JOBS_TELEMETRY`: null with `telemetry: false` (the API is then not loaded) or without `@opentelemetry/api`. */
export const jobsTelemetryProvider: Provider = {
  provide: JOBS_TELEMETRY,
  inject: [JOBS_RESOLVED_OPTIONS, JobReadStore, JobHandlerRegistry],
  useFactory: async (
    options: ResolvedJobsOptions,
    reads: JobReadStore,
    registry: JobHandlerRegistry,
  ): Promise<JobsTelemetry | null> => {
    if (options.telemetry === false) return null;
    const api = await loadOpenTelemetryApi();
    if (!api) return null;
    const { metricsIntervalMs, extraJobNames } = options.telemetry;
    const labels = new MetricLabels((name) => registry.get(name) !== undefined, extraJobNames);
    return new OpenTelemetryJobsTelemetry(api, reads, options.workerId, metricsIntervalMs, labels);
  },
};
