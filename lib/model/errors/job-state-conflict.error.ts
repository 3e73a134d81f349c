import { JobsError } from './jobs.error.js';

/**
 * A retry or cancel of a job whose current status does not allow it: retry revives a `dead`, `failed` or
 * `cancelled` job, cancel stops a `pending` or `running` one. Nothing was written.
 */
export class JobStateConflictError extends JobsError {
  constructor(
    readonly action: 'retry' | 'cancel',
    readonly jobId: string,
    readonly status: string,
  ) {
    const rule = action === 'retry' ? 'only dead, failed or cancelled jobs' : 'only pending or running jobs';
    super(`Cannot ${action} job ${jobId}: it is ${status} (${action} applies to ${rule})`);
  }
}
