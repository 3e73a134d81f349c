import type { Provider } from '@nestjs/common';
import { JOBS_RESOLVED_OPTIONS } from '../jobs.constants';
import type { ResolvedJobsOptions } from '../jobs.options';
import { JobsRepository } from '../persistence/jobs.repository';
import { JOBS_TELEMETRY, type JobsTelemetry } from './jobs-telemetry';
import { OpenTelemetryJobsTelemetry } from './open-telemetry-jobs-telemetry';
import { loadOpenTelemetryApi } from './opentelemetry-api.loader';

/** `JOBS_TELEMETRY`: null with `telemetry: false` (the API is then not loaded) or without `@opentelemetry/api`. */
export const jobsTelemetryProvider: Provider = {
  provide: JOBS_TELEMETRY,
  inject: [JOBS_RESOLVED_OPTIONS, JobsRepository],
  useFactory: async (options: ResolvedJobsOptions, repository: JobsRepository): Promise<JobsTelemetry | null> => {
    if (options.telemetry === false) return null;
    const api = await loadOpenTelemetryApi();
    if (!api) return null;
    return new OpenTelemetryJobsTelemetry(api, repository, options.workerId, options.telemetry.metricsIntervalMs);
  },
};
