import { SetMetadata } from '@nestjs/common';
import { JOB_HANDLER_METADATA } from '../jobs.constants';
import type { JobHandlerMetadata, JobHandlerOptions } from './job-handler.options';

/**
 * Marks a provider (or controller) method as the handler of job `name`. It is called with
 * `(payload, ctx: JobExecutionContext)` and runs on the instance, so injected dependencies work.
 * Names are validated at bootstrap: empty, non-string or duplicate names fail the app's start.
 *
 * @example
 * ```ts
 * @Injectable()
 * export class EmailJobs {
 *   constructor(private readonly mailer: Mailer) {}
 *
 *   @JobHandler('email.send', { maxAttempts: 3, timeoutMs: 30_000 })
 *   async send(payload: { to: string }, ctx: JobExecutionContext) {
 *     await this.mailer.send(payload.to, { signal: ctx.signal });
 *   }
 * }
 * ```
 */
export function JobHandler(name: string, options: JobHandlerOptions = {}): MethodDecorator {
  const metadata: JobHandlerMetadata = { name, options };
  return SetMetadata(JOB_HANDLER_METADATA, metadata);
}
