import { JobsError } from './jobs.error.js';

/** Throw from a handler to dead-letter the job at once, without further retries. */
export class UnrecoverableJobError extends JobsError {}
