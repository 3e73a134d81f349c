import { Injectable } from '@nestjs/common';
import type { Observable } from 'rxjs';
import { JobsAdmin } from './admin/jobs-admin.service.js';
import type { PurgeOptions } from './admin/purge-options.js';
import { PausedNames } from './claim/paused-names.js';
import type { EnqueueResult } from './enqueue/enqueue-result.js';
import { JobEnqueuer } from './enqueue/job-enqueuer.service.js';
import type { JobsWorker } from './fleet/jobs-worker.js';
import { toJobsWorker } from './fleet/worker-presence.js';
import { WorkersRepository } from './fleet/workers.repository.js';
import { JobsWorkerMonitor } from './liveness/jobs-worker.monitor.js';
import type { JobsWorkerStatus } from './liveness/jobs-worker-status.js';
import type { WorkerStatusOptions } from './liveness/worker-status-options.js';
import { now } from './model/clock.js';
import { InvalidDurationError } from './model/errors/invalid-duration.error.js';
import type { JobEvent } from './model/events/job-event.js';
import { JobEvents } from './model/events/job-events.js';
import type { NamePauseEvent, PausedName } from './model/events/name-pause-event.js';
import type {
  CatalogueEnqueueArgs,
  DeclaredJobName,
  EnqueueManyItems,
  JobPayloads,
  UncataloguedEnqueueArgs,
  UncataloguedJobName,
} from './model/job-catalogue.js';
import type { JobRecord, JobStatus } from './model/job-record.js';
import type {
  EnqueuedJobRecord,
  EnqueueItem,
  EnqueueManyOptions,
  EnqueueOptions,
  RunNowOutcome,
} from './model/jobs.types.js';
import { requireJobId } from './model/require-job-id.js';
import { isDuration } from './model/validate.js';
import { toJobRecord } from './persistence/job.schema.js';
import type { JobListPage, ListJobsOptions } from './persistence/list-jobs-options.js';
import type { JobMetrics } from './query/job-metrics.js';
import type { JobMetricsOptions } from './query/job-metrics-options.js';
import { JobsQuery } from './query/jobs-query.service.js';
import type { DrainOptions } from './worker/drain-options.js';
import { JobWaiter } from './worker/job-waiter.service.js';
import { JobsDrainer } from './worker/jobs-drainer.js';
import { RunNow } from './worker/run-now.service.js';

/** Enqueue, inspect and manage jobs. Inject it anywhere in an app that imports `JobsModule`. */
@Injectable()
export class JobsService {
  /**
   * Lifecycle events of jobs in this process (enqueued here, or run by this worker), for metrics and logs.
   * Never carries payloads.
   * @example jobs.events$.pipe(filter((e) => e.type === 'dead')).subscribe((e) => alert(e.name, e.error));
   */
  readonly events$: Observable<JobEvent>;

  /**
   * Names paused and resumed, as this process learns it: at once for its own `pause`/`resume`, and within one poll
   * interval for a call made in another process when this one runs a worker. Not job events: they carry no job.
   * @example jobs.pauses$.subscribe(({ type, name }) => logger.warn(`${name} ${type}`));
   */
  readonly pauses$: Observable<NamePauseEvent>;

  constructor(
    events: JobEvents,
    private readonly enqueuer: JobEnqueuer,
    private readonly waiter: JobWaiter,
    private readonly drainer: JobsDrainer,
    private readonly query: JobsQuery,
    private readonly admin: JobsAdmin,
    private readonly runNowService: RunNow,
    private readonly monitor: JobsWorkerMonitor,
    private readonly workersRepository: WorkersRepository,
    private readonly paused: PausedNames,
  ) {
    this.events$ = events.events$;
    this.pauses$ = paused.changes$;
  }

  /**
   * Stores a job for a handler to run. Validates everything before writing: on any error nothing is stored. With a
   * `dedupeKey` held by a pending or running job of the same name, returns that job with `deduplicated: true` and
   * stores nothing (and emits no `enqueued` event). With `throttle`, the job of the key's window is returned the same
   * way once it exists, even finished; with `debounce`, the pending job of the key takes your payload and a later
   * `runAt` and is returned with `deduplicated: true` (see docs/enqueueing.md, "Throttle and debounce"). A stored
   * job's record carries your payload as given (the same object); `findById` returns it as stored.
   *
   * Once the app declares a `JobPayloads` catalogue, `name` must be a declared name and `payload` its declared type;
   * a name declared elsewhere (another service's) goes through the overload taking `{ strict: false }`.
   *
   * With `{ session }` (a `ClientSession` of the jobs connection) every read and write goes in that session: inside
   * its transaction the job exists if and only if the transaction commits, a held `dedupeKey` returns its holder
   * without aborting the transaction (one upsert, no duplicate-key error), and the `enqueued` event and local wake-up
   * wait for the commit (none for a rolled-back job). Two transactions taking one key at once: the second gets a
   * write conflict (`TransientTransactionError`) that `withTransaction` retries.
   * @throws UnknownJobError, InvalidPayloadError, InvalidOptionError (also for an option key it does not know, such as
   * a misspelt `dedupe_key`, a `runAt` outside the years 2000–9999 or a `maxAttempts` above 1,000)
   * @throws InvalidSessionError for a session that is not a ClientSession, is another MongoClient's, or has ended.
   * @throws UniqueIndexRejectedJobError when a unique index of the application (not the library's) rejects the job.
   * @throws DedupeKeyContendedError when the key changed hands at every try (its jobs finish as fast as they come).
   * @example await jobs.enqueue('email.send', { to: 'a@example.com' }, { delayMs: 60_000, dedupeKey: 'welcome:42' });
   */
  enqueue<TName extends DeclaredJobName>(
    name: TName,
    ...args: CatalogueEnqueueArgs<TName>
  ): Promise<EnqueuedJobRecord<JobPayloads[TName]>>;
  /**
   * Stores a job for a handler to run (see the overload above). Without a `JobPayloads` catalogue any name and
   * payload type check; with one, this is the escape hatch for names it does not declare (another service's, or
   * computed at run time): pass `{ strict: false }`, so that this process's handlers are not required either.
   * @example await jobs.enqueue('billing.charge', { cents: 100 }, { strict: false });
   */
  enqueue<TPayload = unknown, TName extends string = string>(
    name: UncataloguedJobName<TName>,
    ...args: UncataloguedEnqueueArgs<TPayload>
  ): Promise<EnqueuedJobRecord<TPayload>>;
  async enqueue(name: string, payload?: unknown, options: EnqueueOptions = {}): Promise<EnqueuedJobRecord<unknown>> {
    return enqueuedRecord(await this.enqueuer.enqueue(name, payload, options));
  }

  /**
   * Stores many jobs in one bulk insert, returned in input order. All items are validated first; with a
   * `dedupeKey` already held by a pending or running job of the same name (or repeated in the batch), the holder is
   * returned for that item, with `deduplicated: true`. Throttled and debounced items are written one at a time after
   * the others, in input order, each as `enqueue` writes it.
   *
   * Once the app declares a `JobPayloads` catalogue, each item is checked by its own name as `enqueue` checks it
   * (an undeclared name needs `options: { strict: false }`).
   * @throws UnknownJobError, InvalidPayloadError, InvalidOptionError before anything is written (also for a key an
   * item, its `options` or the batch `options` does not have, such as an item's `opts`).
   * @throws UniqueIndexRejectedJobError, DedupeKeyContendedError as `enqueue` does; the other items may be stored
   * (each stored one emits `enqueued`).
   * @throws InvalidSessionError as `enqueue` does; `options.session` covers the whole batch as `enqueue`'s does one
   * job (inside a transaction: one bulk insert of the keyless items, one upsert per keyed item).
   * @example await connection.transaction((session) => jobs.enqueueMany(items, { session }));
   */
  async enqueueMany<TPayload = unknown, TName extends string = never>(
    items: EnqueueManyItems<TPayload, TName>,
    options: EnqueueManyOptions = {},
  ): Promise<EnqueuedJobRecord<TPayload>[]> {
    return (await this.enqueuer.enqueueMany(items as EnqueueItem[], options)).map((result) =>
      enqueuedRecord<TPayload>(result),
    );
  }

  /** @throws InvalidJobIdError for anything but a 24-hex id. */
  async findById<TPayload = unknown>(id: string): Promise<JobRecord<TPayload> | null> {
    return this.query.findById<TPayload>(id);
  }

  /**
   * Resolves with the job's record once it is `completed` (its `result` set), `dead`, `failed` or `cancelled`,
   * whichever process runs it: a job run or cancelled here is seen as soon as it finishes, one run elsewhere within
   * `min(pollIntervalMs, 1 s)` (the row is polled by id). A job already final resolves at once.
   * @throws InvalidJobIdError for a malformed id, InvalidDurationError for a `timeoutMs` not in (0, 1e12], and
   * JobNotFoundError when no job has this id (all before waiting).
   * @throws WaitTimeoutError when the job is not final within `timeoutMs`; the job is untouched and may still finish.
   * @example
   * const { id } = await jobs.enqueue('report.build', { reportId });
   * const job = await jobs.waitUntilFinished(id, { timeoutMs: 60_000 });
   * if (job.status === 'completed') return job.result;
   */
  async waitUntilFinished<TPayload = unknown>(
    id: string,
    options: { timeoutMs: number },
  ): Promise<JobRecord<TPayload>> {
    const jobId = requireJobId(id);
    const timeoutMs = options?.timeoutMs;
    if (!isDuration(timeoutMs)) throw new InvalidDurationError('waitUntilFinished timeoutMs', timeoutMs);
    return toJobRecord<TPayload>(await this.waiter.waitUntilFinal(jobId, timeoutMs));
  }

  /**
   * Resolves once no job of `names` is left to run soon: none `running` and none `pending` with a `runAt` before this
   * call's deadline (now + `timeoutMs`), whichever process runs them. So it waits for retries waiting out a backoff
   * and for jobs that handlers enqueue meanwhile, but not for jobs delayed past the deadline. For end-to-end tests and
   * scripts: enqueue, drain, then look at what the jobs did. `names` defaults to the names this process runs; a name
   * no process handles may be given too, and its due jobs are then what is left when the drain gives up. The
   * collection is read at once, after every local event that may have finished a job, and otherwise every
   * `min(pollIntervalMs, 250 ms)` (jobs run by other processes).
   * @throws InvalidDurationError for a `timeoutMs` not in (0, 1e12]; InvalidOptionError for `names` that is not a
   * non-empty array of job names, an option it does not know, or no `names` in a process that runs no jobs
   * (`worker: false`): all before reading anything.
   * @throws DrainTimeoutError (a `WaitTimeoutError`) when jobs are still left after `timeoutMs`, listing them per
   * name and status with one id each; they are untouched and may still finish.
   * @example
   * await fetch(`${await app.getUrl()}/reports/r1`, { method: 'POST' }); // enqueues report.build
   * await app.get(JobsService).drain({ timeoutMs: 10_000 });
   * expect(app.get(ReportStore).get('r1')).toBeDefined();
   */
  drain(options: DrainOptions): Promise<void> {
    return this.drainer.drain(options);
  }

  /**
   * pending → cancelled; running → cancelled, and its handler's signal is aborted with `JobCancelledError` if it
   * runs in this process. A handler in another process learns it at its next lease renewal (within one heartbeat
   * interval), which finds the row cancelled and aborts its signal with `JobCancelledError` too; from then on its
   * `extendLockTime`/`updateProgress` reject with that error and the attempt ends as cancelled. The dedupe key is
   * freed at once. A running job's `lockedUntil` is raised by the lease its run records (its settle window): until
   * then its handler may still run, so a `retry` is not due, its fleet-limit slots stay taken and neither `purge` nor
   * the sweeper deletes it. Returns the job afterwards (unchanged when it was already finished), or null when there is
   * no such job. The cancelled job is kept for the `cancelled` retention of its handler here (the module's when this
   * process has none for its name), and at least until its `lockedUntil`.
   * @throws InvalidJobIdError
   */
  async cancel(id: string): Promise<JobRecord | null> {
    return this.admin.cancel(id);
  }

  /**
   * dead / failed / cancelled → pending, with `attemptCount` reset (the attempt history is kept) and its dedupe key
   * held again. Due now, except a job cancelled while running: due at its `lockedUntil` as the cancel raised it (the
   * cancelled run's last lease deadline plus one lease, the handler's settle window), so two handlers never run it at
   * once. Returns the job afterwards (unchanged in any other state),
   * or null when there is no such job.
   * @throws InvalidJobIdError
   * @throws DedupeConflictError when another pending or running job of the same name holds its dedupe key; nothing
   * changes.
   * @throws RetryContendedError when the job changed between retry's read and write at every try; nothing changes.
   */
  async retry(id: string): Promise<JobRecord | null> {
    return this.admin.retry(id);
  }

  /**
   * Makes a delayed pending job due now: its `runAt` moves to now, so the next claim takes it in its turn (priority
   * and fleet-wide limits still apply, unlike `runNow`, which runs it in this process at once). Never earlier than
   * the settle window a cancelled run left on a job retried after that cancel (its `lockedUntil`): two handlers never
   * run it at once. Returns the job afterwards (unchanged when it was not pending, or due already), or null when
   * there is no such job.
   * @throws InvalidJobIdError
   */
  async promote(id: string): Promise<JobRecord | null> {
    return this.admin.promote(id);
  }

  /**
   * Deletes finished jobs of one status now, whatever their retention, optionally only those of one `name` and those
   * finished before `finishedBefore`; resolves how many it deleted. Deletes in bounded batches (each a short command),
   * as many as it takes, or at most `limit` (an integer from 1 to 1,000): call again while it returns `limit`. A cron
   * tick's job younger than a day (and an hour) is kept: it is what keeps that tick from running twice. A job
   * cancelled while running is kept until its `lockedUntil` (its handler may still run, and the row holds its
   * fleet-limit slots): a later call deletes it.
   * @throws InvalidOptionError for a status that is not `completed`, `dead`, `failed` or `cancelled` (a pending or
   * running job is never purged), an empty name, an invalid date, a `limit` that is not an integer from 1 to 1,000,
   * or an option it does not know (a misspelt key would otherwise widen the deletion); nothing is deleted.
   * @example await jobs.purge({ status: 'dead', name: 'email.send', finishedBefore: new Date(Date.now() - 86_400_000) });
   */
  async purge(options: PurgeOptions): Promise<number> {
    return this.admin.purge(options);
  }

  /** Number of jobs per status (every status present, zero included). */
  async stats(): Promise<Record<JobStatus, number>> {
    return this.query.stats();
  }

  /**
   * One page of jobs, newest first (by id), optionally filtered; pass `nextCursor` back for the next page (null on
   * the last). Paging is by cursor, not offset: jobs enqueued meanwhile never shift or repeat a page. Rows whose `_id`
   * is not an ObjectId (set aside as `failed`) are listed too, their `id` as a string or JSON.
   * @throws InvalidOptionError for a limit that is not an integer from 1 to 200, an unknown status, an empty name or
   * search, an invalid date, `from` after `to`, or an option it does not know.
   * @throws InvalidCursorError for a cursor `list` did not return.
   * @example const { jobs, nextCursor } = await jobs.list({ status: ['dead', 'failed'], name: 'email.send', limit: 20 });
   */
  async list<TPayload = unknown>(options: ListJobsOptions = {}): Promise<JobListPage<TPayload>> {
    return this.query.list<TPayload>(options);
  }

  /**
   * Figures for dashboards: per job name, rows per status and queue latency (age of the oldest due pending job); the
   * jobs completed, dead and failed per `bucketMs` over the last `windowMs` (by `finishedAt`; buckets aligned on
   * multiples of `bucketMs`, the window rounded out to whole buckets) for the whole queue (`total`) and for a few names:
   * those in `names`, or by default up to 20 with the most failed + dead rows. Every name with rows is counted; only the
   * charted ones carry `buckets` (null otherwise), so the answer stays small however many names there are. Reads the
   * whole collection once per call.
   * @throws InvalidOptionError for a `windowMs` or integer `bucketMs` not in (0, 1e12], a bucket wider than the
   * window, more than 1,000 buckets, `names` that is not an array of at most 50 job names, or `names` whose series
   * (plus the total) would carry more than 8,000 buckets in all.
   * @example const { names, total } = await jobs.metrics({ windowMs: 3_600_000, bucketMs: 60_000 });
   * @example const { names } = await jobs.metrics({ windowMs: 86_400_000, bucketMs: 3_600_000, names: ['email.send'] });
   */
  async metrics(options: JobMetricsOptions): Promise<JobMetrics> {
    return this.query.metrics(options);
  }

  /**
   * Liveness of this process: `up` when the database answers a ping within `timeoutMs` and, for a worker, the poll
   * loop finished an iteration within 3 × `pollIntervalMs` and its last 3 claims did not all fail (a `down` status
   * carries the `reason`). What `JobsHealthIndicator` reports, for apps without `@nestjs/terminus`.
   * @throws InvalidOptionError (the promise rejects) for options that are not an object, an option it does not know,
   * or a `timeoutMs` that is not a number of milliseconds above 0 and at most 60,000; nothing is pinged.
   */
  async workerStatus(options: WorkerStatusOptions = {}): Promise<JobsWorkerStatus> {
    return this.monitor.status(options);
  }

  /**
   * The live worker processes of the whole fleet (every process with `worker: true` on this collection, this one
   * included), sorted by workerId: those whose presence refresh is at most three refresh intervals old. A process
   * that shut down is gone at once; one that died, after three missed refreshes (see docs/operations.md, "Fleet view").
   */
  async workers(): Promise<JobsWorker[]> {
    return (await this.workersRepository.findLive(now())).map(toJobsWorker);
  }

  /**
   * Claims exactly this job, runs it in this process (regardless of `worker` and `runOnly`), and returns the row it
   * ended in. A `running` job whose lease ran out (its worker died) is taken over like a reclaim, with the lost
   * attempt counted; if that was its last attempt it is dead-lettered instead (`dead_lettered`) and nothing runs.
   * A row the server refuses to claim as stored is set aside as `failed` (`not_started`, with the reason).
   * A job whose name has no handler in this process, one running under a live lease, one not yet due, or one
   * already finished is a conflict, and the row is left as it was; so is a job it could take while every one of the
   * process's `concurrency` slots is running a job (`busy`), and one whose name is at a fleet-wide limit
   * (`limit_reached`).
   */
  async runNow(id: string): Promise<RunNowOutcome> {
    return this.runNowService.run(id);
  }

  /**
   * Pauses a job name fleet-wide, stored in the database: every worker (of this version or later) stops claiming it
   * within one poll interval, and this process's at once. Jobs of it already running finish; its pending jobs wait;
   * its expired leases are not reclaimed (a reclaim starts the job again) until `resume`; `runNow` answers a conflict
   * `paused`; enqueues and cron ticks still store jobs, which wait. Idempotent. A worker of an older version ignores
   * the pause: during a rolling deploy, `workers()` shows which workers honour it (their `paused` field).
   * @throws InvalidOptionError (the promise rejects) for a name that is not a non-empty string of at most 200
   * characters, or when 1,000 names are paused already; nothing is written.
   * @example await jobs.pause('email.send'); // … fix the mail provider … await jobs.resume('email.send');
   */
  async pause(name: string): Promise<void> {
    await this.paused.pause(name);
  }

  /**
   * Resumes a paused name: this process's worker claims its jobs at once, other workers within one poll interval.
   * Resolves whether the name was paused.
   * @throws InvalidOptionError (the promise rejects) for a name that is not a non-empty string of at most 200
   * characters; nothing is written.
   */
  async resume(name: string): Promise<boolean> {
    return this.paused.resume(name);
  }

  /** The names paused fleet-wide now (read from the database), sorted, with when each was paused. */
  async pausedNames(): Promise<PausedName[]> {
    return this.paused.read();
  }
}

/** A stored job's record carries the caller's own payload (nothing to decode); a holder's is read back as stored. */
function enqueuedRecord<TPayload>({ doc, deduplicated }: EnqueueResult): EnqueuedJobRecord<TPayload> {
  return { ...toJobRecord<TPayload>(doc, { payloadAsGiven: !deduplicated }), deduplicated };
}
