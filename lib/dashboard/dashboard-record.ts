import type { JobRecord } from '../persistence/job.types';

/** A job as the dashboard answers it: without `payload` and `result` unless payloads are shown. */
export type DashboardJobRecord = Omit<JobRecord, 'payload' | 'result'> & Partial<Pick<JobRecord, 'payload' | 'result'>>;

/** Strips what may hold personal data or secrets; errors, attempts and progress always stay. */
export function dashboardRecord(job: JobRecord, showPayloads: boolean): DashboardJobRecord {
  if (showPayloads) return job;
  const { payload: _payload, result: _result, ...rest } = job;
  return rest;
}
