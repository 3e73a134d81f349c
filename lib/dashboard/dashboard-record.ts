import type { JobAttempt, JobRecord } from '../model/job-record.js';

/**
 * A job as the dashboard answers it: without `payload` and `result` unless payloads are shown, and its attempts
 * without `stack` unless stacks are shown.
 */
export type DashboardJobRecord = Omit<JobRecord, 'payload' | 'result'> & Partial<Pick<JobRecord, 'payload' | 'result'>>;

/** What a dashboard may show of a job. */
export interface DashboardExposure {
  showPayloads: boolean;
  showStacks: boolean;
}

/**
 * Strips what may hold personal data or secrets: payload and result, and each attempt's stack with its cause chain
 * (hosts, paths, credentials in a driver's message). Error messages, error classes and progress always stay.
 */
export function dashboardRecord(job: JobRecord, exposure: DashboardExposure): DashboardJobRecord {
  const { payload, result, ...rest } = job;
  return {
    ...rest,
    ...(exposure.showPayloads && { payload, result }),
    attempts: exposure.showStacks ? job.attempts : job.attempts.map(withoutStack),
  };
}

function withoutStack({ stack: _stack, ...attempt }: JobAttempt): JobAttempt {
  return attempt;
}
