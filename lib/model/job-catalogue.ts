import type { EnqueueItem, EnqueueItemOptions, EnqueueOptions } from './jobs.types.js';

/**
 * The app's job catalogue: job name → payload type. Empty here; an app declares its jobs by declaration merging, and
 * from then on `JobsService.enqueue`/`enqueueMany` reject undeclared (misspelt) names and wrong payloads at compile
 * time, and `@JobHandler` checks its method's payload parameter. Without a declaration everything is `unknown`-typed
 * and nothing is checked. Types only: nothing changes at run time.
 *
 * @example
 * ```ts
 * declare module 'nestjs-mongo-jobs' {
 *   interface JobPayloads {
 *     'email.welcome': { userId: string };
 *     'cache.flush': undefined; // a job without payload
 *   }
 * }
 * ```
 */
// biome-ignore lint/suspicious/noEmptyInterface: filled in by the app through declaration merging.
export interface JobPayloads {}

/**
 * Optional: job name → what its handler resolves with. `@JobHandler` then checks the method's return type (a value
 * or a promise of it), and `JobResult<name>` names it. Names not declared here resolve with `unknown`.
 *
 * @example
 * ```ts
 * declare module 'nestjs-mongo-jobs' {
 *   interface JobResults { 'report.build': { url: string } }
 * }
 * ```
 */
// biome-ignore lint/suspicious/noEmptyInterface: filled in by the app through declaration merging.
export interface JobResults {}

/** Names declared in `JobPayloads` (`never` while nothing is declared). */
export type DeclaredJobName = keyof JobPayloads & string;

/** Whether the app declared a catalogue: names and payloads are checked only then. */
type CatalogueDeclared = [DeclaredJobName] extends [never] ? false : true;

/** A name `JobPayload`/`JobResult` accept: a declared one once there is a catalogue, any string before. */
export type JobName = CatalogueDeclared extends true ? DeclaredJobName : string;

/**
 * A declared payload as its handler receives it: a job enqueued without payload (`undefined`) is stored, and handed
 * over, as `null` (see Payloads in docs/enqueueing.md).
 */
export type StoredPayload<TPayload> = undefined extends TPayload ? Exclude<TPayload, undefined> | null : TPayload;

/**
 * The payload type of job `TName` as its handler receives it (`unknown` without a catalogue), for a handler's
 * parameter.
 * @example
 * ```ts
 * @JobHandler('email.welcome')
 * async welcome(payload: JobPayload<'email.welcome'>, ctx: JobExecutionContext) {}
 * ```
 */
export type JobPayload<TName extends JobName> = TName extends DeclaredJobName
  ? StoredPayload<JobPayloads[TName]>
  : unknown;

/** What the handler of job `TName` resolves with: declared in `JobResults`, else `unknown`. */
export type JobResult<TName extends JobName> = TName extends keyof JobResults ? JobResults[TName] : unknown;

/** The options that open the escape hatch for a name the catalogue does not declare. */
export type UncataloguedEnqueueOptions = EnqueueOptions & { strict: false };

/** `enqueue`'s arguments after a declared name: the payload (optional when it accepts `undefined`), then options. */
export type CatalogueEnqueueArgs<TName extends DeclaredJobName> = undefined extends JobPayloads[TName]
  ? [payload?: JobPayloads[TName], options?: EnqueueOptions]
  : [payload: JobPayloads[TName], options?: EnqueueOptions];

/** `enqueue`'s arguments after any other name: as before catalogues existed, and `strict: false` once there is one. */
export type UncataloguedEnqueueArgs<TPayload> = CatalogueDeclared extends true
  ? [payload: TPayload, options: UncataloguedEnqueueOptions]
  : [payload?: TPayload, options?: EnqueueOptions];

/** A name that is not declared in the catalogue (a declared one is `never` here, so its payload is always checked). */
export type UncataloguedJobName<TName extends string> = TName & (TName extends DeclaredJobName ? never : unknown);

/** One `enqueueMany` item of a declared name. */
export type CatalogueEnqueueItem<TName extends DeclaredJobName = DeclaredJobName> = {
  [N in TName]: undefined extends JobPayloads[N]
    ? { name: N; payload?: JobPayloads[N]; options?: EnqueueItemOptions }
    : { name: N; payload: JobPayloads[N]; options?: EnqueueItemOptions };
}[TName];

/**
 * One `enqueueMany` item of a name the catalogue does not declare: needs `strict: false`. `TName` is inferred from
 * the batch's names with the declared ones removed, so a declared name's payload is checked even with `strict: false`.
 */
export interface UncataloguedEnqueueItem<TPayload = unknown, TName extends string = string> {
  name: TName;
  payload?: TPayload;
  options: EnqueueItemOptions & { strict: false };
}

/**
 * `enqueueMany`'s items: without a catalogue, items of any name and payload type `TPayload` (as before catalogues
 * existed); with one, each item checked by its own name as `enqueue` checks it.
 */
export type EnqueueManyItems<TPayload, TName extends string> = CatalogueDeclared extends true
  ? readonly (CatalogueEnqueueItem | UncataloguedEnqueueItem<unknown, Exclude<TName, DeclaredJobName>>)[]
  : EnqueueItem<TPayload>[];
