import { JobsError } from './jobs.error.js';

/** Two `@JobHandler` methods claim the same job name. */
export class DuplicateJobHandlerError extends JobsError {
  constructor(
    readonly jobName: string,
    readonly firstSite: string,
    readonly secondSite: string,
  ) {
    super(`Job name "${jobName}" is handled twice: by ${firstSite} and by ${secondSite}. Job names must be unique.`);
  }
}
