import { JobsError } from './jobs.error.js';

/** The worker shut down before the handler finished; the job goes back to `pending` with no attempt counted. */
export class WorkerShutdownError extends JobsError {
  constructor(readonly jobId: string) {
    super(`Worker shut down before job ${jobId} finished; the job was released for another worker`);
  }
}
