import { Inject, Injectable } from '@nestjs/common';
import type { ClientSession } from 'mongoose';
import { DedupeKeyContendedError } from '../model/errors/dedupe-key-contended.error.js';
import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { JobEvents } from '../model/events/job-events.js';
import { DEDUPE_WRITE_TRIES } from '../model/jobs.constants.js';
import type { EnqueueItem, EnqueueManyOptions, EnqueueOptions } from '../model/jobs.types.js';
import { JOBS_TELEMETRY, type JobsTelemetry } from '../model/jobs-telemetry.js';
import type { NewJobDocument } from '../model/new-job-document.js';
import { onlyKnownKeys } from '../model/validate.js';
import { type InsertOutcome, JobEnqueueStore } from '../persistence/job-enqueue.store.js';
import { afterCommit } from './after-commit.js';
import { ENQUEUE_ITEM_KEYS, ENQUEUE_MANY_OPTION_KEYS } from './enqueue-option-keys.js';
import type { EnqueueResult } from './enqueue-result.js';
import { requireEnqueueSession } from './enqueue-session.js';
import { JobDocumentFactory } from './job-document.factory.js';
import { WindowedEnqueue } from './windowed-enqueue.js';
import { WorkArrived } from './work-arrived.js';

/**
 * The one way a job gets into the collection (`JobsService` and the cron scheduler): builds and validates it, inserts
 * it (single, bulk, cron tick; the first two optionally in the caller's session and transaction, a cron tick never),
 * settles the race for its dedupe key, wakes this process's idle poll loop and emits `enqueued` once per stored job,
 * never for a deduplicated one (and, inside a transaction, only once it commits).
 */
@Injectable()
export class JobEnqueuer {
  constructor(
    private readonly documents: JobDocumentFactory,
    private readonly enqueues: JobEnqueueStore,
    private readonly windowed: WindowedEnqueue,
    private readonly workArrived: WorkArrived,
    private readonly events: JobEvents,
    @Inject(JOBS_TELEMETRY) private readonly telemetry: JobsTelemetry | null,
  ) {}

  /**
   * With a `session` every read and write goes in it. Inside its transaction a dedupe key is taken by one upsert
   * (`upsertByScope`: a duplicate-key error would abort the transaction), and the job is announced once it commits.
   * @throws UnknownJobError, InvalidPayloadError, InvalidOptionError, InvalidSessionError before anything is written.
   * @throws UniqueIndexRejectedJobError, DedupeKeyContendedError (see `JobsService.enqueue`).
   */
  async enqueue(name: unknown, payload: unknown, options: EnqueueOptions): Promise<EnqueueResult> {
    const doc = this.documents.build(name, payload, options);
    const session = requireEnqueueSession(options.session, (candidate) => this.enqueues.ownsSession(candidate));
    if (!this.telemetry) return this.store(doc, session);
    return this.telemetry.traceSend([doc], () => this.store(doc, session), storedOne);
  }

  /** Stores one job, then announces it (inside a transaction: once it commits). */
  private async store(doc: NewJobDocument, session: ClientSession | undefined): Promise<EnqueueResult> {
    const release = this.events.hold([doc._id.toHexString()]);
    let announced = false;
    try {
      const stored = await this.write(doc, session);
      announced = true;
      this.announce([stored], session, release);
      return stored;
    } finally {
      if (!announced) release();
    }
  }

  /**
   * Every item is validated before anything is written; one bulk insert, one look-up of held keys (inside a
   * transaction: one bulk insert of the keyless items, one upsert per keyed item).
   */
  async enqueueMany(items: EnqueueItem[], options: EnqueueManyOptions = {}): Promise<EnqueueResult[]> {
    if (!Array.isArray(items)) throw new InvalidOptionError('items', items, 'must be an array');
    if (options === null || typeof options !== 'object') {
      throw new InvalidOptionError('options', options, 'must be an object');
    }
    onlyKnownKeys(options, ENQUEUE_MANY_OPTION_KEYS, 'an enqueueMany option');
    const docs = items.map((item) => {
      // An item's misspelt `opts` would otherwise store the job without its options.
      if (item !== null && typeof item === 'object') {
        onlyKnownKeys(item, ENQUEUE_ITEM_KEYS, 'a key of an enqueueMany item');
      }
      // Untyped callers: the types leave `session` out of an item's options.
      const itemSession = (item?.options as EnqueueOptions | undefined)?.session;
      if (itemSession !== undefined) {
        throw new InvalidOptionError('session', itemSession, "goes in enqueueMany's second argument, for the batch");
      }
      return this.documents.build(item?.name, item?.payload, item?.options ?? {});
    });
    const session = requireEnqueueSession(options.session, (candidate) => this.enqueues.ownsSession(candidate));
    if (docs.length === 0) return [];
    if (!this.telemetry) return this.storeBatch(docs, session);
    return this.telemetry.traceSend(docs, () => this.storeBatch(docs, session), storedOfMany);
  }

  /** Stores a validated batch, then announces what was stored (inside a transaction: once it commits). */
  private async storeBatch(docs: NewJobDocument[], session: ClientSession | undefined): Promise<EnqueueResult[]> {
    const release = this.events.hold(docs.map((doc) => doc._id.toHexString()));
    const results: (EnqueueResult | undefined)[] = [];
    try {
      const windowed = docs.flatMap((doc, index) => (WindowedEnqueue.isWindowed(doc) ? [index] : []));
      const rest = docs.flatMap((doc, index) => (WindowedEnqueue.isWindowed(doc) ? [] : [index]));
      const restResults: (EnqueueResult | undefined)[] = [];
      try {
        const restDocs = rest.map((index) => docs[index]);
        if (session?.inTransaction()) await this.storeManyInTransaction(restDocs, session, restResults);
        else if (rest.length > 0) await this.storeMany(restDocs, session, restResults);
      } finally {
        for (const [at, index] of rest.entries()) results[index] = restResults[at];
      }
      // Throttled and debounced items one at a time, in input order: one repeating a key finds the item before it.
      for (const index of windowed) results[index] = await this.windowed.store(docs[index], session);
    } finally {
      // Also when an item ends the batch with an error: the jobs stored until then will run, so they are announced.
      this.announce(
        results.filter((result) => result !== undefined),
        session,
        release,
      );
    }
    return results as EnqueueResult[];
  }

  /**
   * Writes one job: a throttled or debounced one by its window's rules; by upsert inside a transaction when it has a
   * dedupe key, else by insert (then `takeKey`).
   */
  private async write(doc: NewJobDocument, session: ClientSession | undefined): Promise<EnqueueResult> {
    if (WindowedEnqueue.isWindowed(doc)) return this.windowed.store(doc, session);
    if (session?.inTransaction() && doc.dedupeScope !== undefined) return this.upsert(doc, session);
    return this.settle(doc, await this.enqueues.insert(doc, session)) ?? (await this.takeKey(doc, session));
  }

  private async upsert(doc: NewJobDocument, session: ClientSession): Promise<EnqueueResult> {
    const outcome = await this.enqueues.upsertByScope(doc, session);
    return outcome.kind === 'inserted'
      ? { doc: outcome.doc, deduplicated: false }
      : { doc: outcome.holder, deduplicated: true };
  }

  /**
   * Inside a transaction no write may fail on a dedupe key (that aborts the transaction): keyless jobs go in one bulk
   * insert, keyed ones one upsert each, in input order (a transaction runs its operations one at a time), so a key
   * repeated in the batch finds the item before it. Fills `results` by input index as it goes.
   */
  private async storeManyInTransaction(
    docs: NewJobDocument[],
    session: ClientSession,
    results: (EnqueueResult | undefined)[],
  ): Promise<void> {
    const keyless = docs.flatMap((doc, index) => (doc.dedupeScope === undefined ? [index] : []));
    if (keyless.length > 0) {
      const outcomes = await this.enqueues.insertMany(
        keyless.map((index) => docs[index]),
        session,
      );
      for (const [at, outcome] of outcomes.entries()) {
        if (outcome.kind === 'rejected') throw outcome.error;
        results[keyless[at]] = this.settle(docs[keyless[at]], outcome);
      }
    }
    for (const [index, doc] of docs.entries()) {
      if (doc.dedupeScope !== undefined) results[index] = await this.upsert(doc, session);
    }
  }

  private async storeMany(
    docs: NewJobDocument[],
    session: ClientSession | undefined,
    results: (EnqueueResult | undefined)[],
  ): Promise<void> {
    const outcomes = await this.enqueues.insertMany(docs, session);
    for (const [index, outcome] of outcomes.entries()) {
      if (outcome.kind === 'inserted') results[index] = { doc: outcome.doc, deduplicated: false };
    }
    for (const outcome of outcomes) if (outcome.kind === 'rejected') throw outcome.error;
    for (const [index, doc] of docs.entries()) results[index] = this.settle(doc, outcomes[index] as InsertOutcome);
    const clashing = docs.flatMap((doc, index) => (results[index] ? [] : [doc.dedupeScope as string]));
    if (clashing.length === 0) return;
    const holders = new Map(
      (await this.enqueues.findLiveHolders([...new Set(clashing)], session)).map((job) => [job.dedupeScope, job]),
    );
    for (const [index, doc] of docs.entries()) {
      if (results[index]) continue;
      const holder = holders.get(doc.dedupeScope);
      // The holder finished between the bulk write and the look-up: the first such item takes the key again.
      results[index] = holder ? { doc: holder, deduplicated: true } : await this.takeKey(doc, session);
      holders.set(doc.dedupeScope, (results[index] as EnqueueResult).doc);
    }
  }

  /** Enqueues the job of one cron tick unless it exists already. Resolves true when this call stored it. */
  async enqueueTick(name: string, tick: Date): Promise<boolean> {
    const doc = this.documents.buildTick(name, tick);
    return this.telemetry
      ? this.telemetry.traceSend([doc], () => this.storeTick(doc), tickStored)
      : this.storeTick(doc);
  }

  private storeTick(doc: NewJobDocument): Promise<boolean> {
    return this.events.holdWhileEnqueueing([doc._id.toHexString()], async () => {
      const outcome = await this.enqueues.insert(doc);
      if (outcome.kind !== 'inserted') return false;
      this.announceNow([{ doc: outcome.doc, deduplicated: false }]);
      return true;
    });
  }

  /** An insert's result, or undefined when its dedupe key was held: `takeKey` then finds out by whom. */
  private settle(doc: NewJobDocument, outcome: InsertOutcome): EnqueueResult | undefined {
    if (outcome.kind === 'inserted') return { doc: outcome.doc, deduplicated: false };
    if (outcome.kind === 'dedupe-clash') return undefined;
    throw new Error(`Job ${doc.name} has no tick key, yet its insert clashed on one`);
  }

  /** Resolves the live holder of `doc`'s key, or stores `doc` once the key is free; bounded tries. */
  private async takeKey(doc: NewJobDocument, session?: ClientSession): Promise<EnqueueResult> {
    const scope = doc.dedupeScope as string;
    let clash: unknown;
    for (let tries = 0; tries < DEDUPE_WRITE_TRIES; tries += 1) {
      const [holder] = await this.enqueues.findLiveHolders([scope], session);
      if (holder) return { doc: holder, deduplicated: true };
      // The holder finished between our insert and our read, or a finished row still carries the scope: free it.
      await this.enqueues.freeStaleScope(scope, session);
      const outcome = await this.enqueues.insert(doc, session);
      const stored = this.settle(doc, outcome);
      if (stored) return stored;
      if (outcome.kind === 'dedupe-clash') clash = outcome.error;
    }
    throw new DedupeKeyContendedError(doc.name, doc.dedupeKey as string, DEDUPE_WRITE_TRIES, { cause: clash });
  }

  /**
   * Wakes an idle poll loop here and emits `enqueued` for each job stored (a deduplicated one was announced), then
   * `release`s the other events held for these jobs. Inside a transaction, all of it waits for the commit, and a
   * transaction that does not commit announces nothing (see `afterCommit`).
   */
  private announce(results: EnqueueResult[], session: ClientSession | undefined, release: () => void): void {
    const now = () => {
      this.announceNow(results);
      release();
    };
    // A failed commit releases the held events at once (they exist only if the job does), `enqueued` still waits.
    if (session?.inTransaction()) afterCommit(session, now, release, release);
    else now();
  }

  private announceNow(results: EnqueueResult[]): void {
    const stored = results.filter((result) => !result.deduplicated);
    if (stored.length === 0) return;
    // Delayed jobs only: the worker sets its timer for the first instead of claiming now (a claim would find nothing).
    this.workArrived.signal(new Date(Math.min(...stored.map((result) => result.doc.runAt.getTime()))));
    for (const { doc, deduplicated } of results) {
      if (!deduplicated) this.events.emit('enqueued', { jobId: doc._id.toHexString(), name: doc.name, attempt: 0 });
    }
  }
}

/** Whether a traced enqueue stored a new job (telemetry counts those as sent messages). */
function storedOne(result: EnqueueResult): boolean {
  return !result.deduplicated;
}

function storedOfMany(results: EnqueueResult[], index: number): boolean {
  return !results[index]?.deduplicated;
}

function tickStored(stored: boolean): boolean {
  return stored;
}
