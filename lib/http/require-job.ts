import { JobNotFoundError } from '../model/errors/job-not-found.error.js';

/**
 * The job a lookup found, or `JobNotFoundError` (404 through `JobsExceptionFilter`) when there was none: for
 * `findById`, `cancel` and `retry`, which return null for an id no job has.
 * @example
 * ```ts
 * @Post(':id/retry')
 * retry(@Param('id') id: string) {
 *   return requireJob(id, this.jobs.retry(id)); // 404 unknown or malformed id, 409 key held by another job
 * }
 * ```
 */
export async function requireJob<TJob extends object>(
  id: string,
  lookup: TJob | null | PromiseLike<TJob | null>,
): Promise<TJob> {
  const job = await lookup;
  if (job === null) throw new JobNotFoundError(id);
  return job;
}
