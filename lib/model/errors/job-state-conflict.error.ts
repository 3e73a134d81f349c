import { JobsError } from './jobs.error.js';

const RULES = {
  retry: 'only dead, failed or cancelled jobs',
  cancel: 'only pending or running jobs',
  promote: 'only pending jobs',
} as const;

/**
 * A retry, cancel or promote of a job whose current status does not allow it: retry revives a `dead`, `failed` or
 * `cancelled` job, cancel stops a `pending` or `running` one, promote makes a `pending` one due. Nothing was written.
 */
export class JobStateConflictError extends JobsError {
  constructor(
    readonly action: 'retry' | 'cancel' | 'promote',
    readonly jobId: string,
    readonly status: string,
  ) {
    const rule = RULES[action];
    super(`Cannot ${action} job ${jobId}: it is ${status} (${action} applies to ${rule})`);
  }
}
