import { JobsError } from './jobs.error.js';

/**
 * A value passed to `ctx.updateProgress` that is neither a number from 0 to 100 nor a small plain object MongoDB can
 * store; nothing was written.
 */
export class InvalidProgressError extends JobsError {
  constructor(
    readonly path: string,
    readonly problem: string,
  ) {
    super(
      `Job progress must be a number from 0 to 100 or a small plain object: ${path === '' ? 'progress' : `progress.${path}`} ${problem}`,
    );
  }
}
