import { JobsError } from './jobs.error';

/** Throw from a handler to dead-letter the job at once, without further retries. */
export class UnrecoverableJobError extends JobsError {}
