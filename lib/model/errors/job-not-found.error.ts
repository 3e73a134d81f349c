import { JobsError } from './jobs.error.js';

/** No job has this id: what `requireJob` throws when `findById`, `cancel` or `retry` found none (HTTP 404). */
export class JobNotFoundError extends JobsError {
  constructor(readonly jobId: string) {
    super(`No job ${jobId}`);
  }
}
