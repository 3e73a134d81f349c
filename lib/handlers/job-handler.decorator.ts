import { SetMetadata } from '@nestjs/common';
import type { DeclaredJobName, JobPayloads, JobResults, StoredPayload } from '../model/job-catalogue.js';
import type { JobExecutionContext } from '../model/job-execution-context.js';
import { JOB_HANDLER_METADATA } from '../model/jobs.constants.js';
import type { JobHandlerMetadata, JobHandlerOptions } from './job-handler.options.js';

/**
 * The payload a handler of `TName` must accept: the declared one as stored, else anything (an undeclared name's handler types
 * its parameter itself, as before catalogues existed).
 */
// biome-ignore lint/suspicious/noExplicitAny: `unknown` would reject every handler whose parameter is typed.
type HandlerPayload<TName extends string> = TName extends DeclaredJobName ? StoredPayload<JobPayloads[TName]> : any;

/** What a handler of `TName` may return: the declared result (or a promise of it), else anything. */
type HandlerReturn<TName extends string> = TName extends keyof JobResults
  ? JobResults[TName] | PromiseLike<JobResults[TName]>
  : unknown;

/**
 * `@JobHandler(name)` as a method decorator that checks the method against the app's catalogue: a parameter that
 * cannot take the declared payload, or a return type other than the declared result, fails to compile.
 */
export type JobHandlerDecorator<TName extends string> = <
  THandler extends (payload: HandlerPayload<TName>, ctx: JobExecutionContext) => HandlerReturn<TName>,
>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<THandler>,
) => void;

/**
 * Marks a provider (or controller) method as the handler of job `name`. It is called with
 * `(payload, ctx: JobExecutionContext)` and runs on the instance, so injected dependencies work.
 * Names are validated at bootstrap: empty, non-string or duplicate names fail the app's start.
 * When the app declares `name` in its `JobPayloads` (and `JobResults`) catalogue, the method's payload parameter
 * (and return type) must agree with it: type the parameter as `JobPayload<'name'>`.
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
export function JobHandler<TName extends string>(
  name: TName,
  options: JobHandlerOptions = {},
): JobHandlerDecorator<TName> {
  const metadata: JobHandlerMetadata = { name, options };
  return SetMetadata(JOB_HANDLER_METADATA, metadata);
}
