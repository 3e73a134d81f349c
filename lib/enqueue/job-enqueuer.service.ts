import { Inject, Injectable } from '@nestjs/common';
import { DedupeKeyContendedError } from '../errors/dedupe-key-contended.error';
import { InvalidOptionError } from '../errors/invalid-option.error';
import { JobEvents } from '../events/job-events';
import { JobRunner } from '../execution/job-runner.service';
import { DEDUPE_WRITE_TRIES } from '../jobs.constants';
import type { EnqueueItem, EnqueueOptions } from '../jobs.types';
import type { JobDocument } from '../persistence/job.schema';
import { type InsertOutcome, JobsRepository } from '../persistence/jobs.repository';
import { JOBS_TELEMETRY, type JobsTelemetry } from '../telemetry/jobs-telemetry';
import type { NewJobDocument } from '../types/new-job-document';
import { JobDocumentFactory } from './job-document.factory';

/** A stored job, or the pending/running job of its name that holds its dedupe key (`deduplicated`). */
export interface EnqueueResult {
  doc: JobDocument;
  deduplicated: boolean;
}

/**
 * The one way a job gets into the collection (`JobsService` and the cron scheduler): builds and validates it, inserts
 * it (single, bulk, cron tick), settles the race for its dedupe key, wakes this process's idle poll loop and emits
 * `enqueued` once per stored job, never for a deduplicated one.
 */
@Injectable()
export class JobEnqueuer {
  constructor(
    private readonly documents: JobDocumentFactory,
    private readonly repository: JobsRepository,
    private readonly runner: JobRunner,
    private readonly events: JobEvents,
    @Inject(JOBS_TELEMETRY) private readonly telemetry: JobsTelemetry | null,
  ) {}

  /**
   * @throws UnknownJobError, InvalidPayloadError, InvalidOptionError before anything is written.
   * @throws UniqueIndexRejectedJobError, DedupeKeyContendedError (see `JobsService.enqueue`).
   */
  async enqueue(name: unknown, payload: unknown, options: EnqueueOptions): Promise<EnqueueResult> {
    const doc = this.documents.build(name, payload, options);
    return this.telemetry ? this.telemetry.traceSend([doc], () => this.store(doc), storedOne) : this.store(doc);
  }

  private store(doc: NewJobDocument): Promise<EnqueueResult> {
    return this.events.holdWhileEnqueueing([doc._id.toHexString()], async () => {
      const stored = this.settle(doc, await this.repository.insert(doc)) ?? (await this.takeKey(doc));
      this.announce([stored]);
      return stored;
    });
  }

  /** Every item is validated before anything is written; one bulk insert, one look-up of held keys. */
  async enqueueMany(items: EnqueueItem[]): Promise<EnqueueResult[]> {
    if (!Array.isArray(items)) throw new InvalidOptionError('items', items, 'must be an array');
    const docs = items.map((item) => this.documents.build(item?.name, item?.payload, item?.options ?? {}));
    if (docs.length === 0) return [];
    const ids = docs.map((doc) => doc._id.toHexString());
    if (!this.telemetry) return this.events.holdWhileEnqueueing(ids, () => this.storeMany(docs));
    return this.telemetry.traceSend(
      docs,
      () => this.events.holdWhileEnqueueing(ids, () => this.storeMany(docs)),
      storedOfMany,
    );
  }

  private async storeMany(docs: NewJobDocument[]): Promise<EnqueueResult[]> {
    const outcomes = await this.repository.insertMany(docs);
    const results: (EnqueueResult | undefined)[] = outcomes.map((outcome) =>
      outcome.kind === 'inserted' ? { doc: outcome.doc, deduplicated: false } : undefined,
    );
    try {
      for (const outcome of outcomes) if (outcome.kind === 'rejected') throw outcome.error;
      for (const [index, doc] of docs.entries()) results[index] = this.settle(doc, outcomes[index] as InsertOutcome);
      const clashing = docs.flatMap((doc, index) => (results[index] ? [] : [doc.dedupeScope as string]));
      if (clashing.length > 0) {
        const holders = new Map(
          (await this.repository.findLiveHolders([...new Set(clashing)])).map((job) => [job.dedupeScope, job]),
        );
        for (const [index, doc] of docs.entries()) {
          if (results[index]) continue;
          const holder = holders.get(doc.dedupeScope);
          // The holder finished between the bulk write and the look-up: the first such item takes the key again.
          results[index] = holder ? { doc: holder, deduplicated: true } : await this.takeKey(doc);
          holders.set(doc.dedupeScope, (results[index] as EnqueueResult).doc);
        }
      }
    } finally {
      // Also when an item ends the batch with an error: the jobs stored until then will run, so they are announced.
      this.announce(results.filter((result) => result !== undefined));
    }
    return results as EnqueueResult[];
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
      const outcome = await this.repository.insert(doc);
      if (outcome.kind !== 'inserted') return false;
      this.announce([{ doc: outcome.doc, deduplicated: false }]);
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
  private async takeKey(doc: NewJobDocument): Promise<EnqueueResult> {
    const scope = doc.dedupeScope as string;
    let clash: unknown;
    for (let tries = 0; tries < DEDUPE_WRITE_TRIES; tries += 1) {
      const [holder] = await this.repository.findLiveHolders([scope]);
      if (holder) return { doc: holder, deduplicated: true };
      // The holder finished between our insert and our read, or a finished row still carries the scope: free it.
      await this.repository.freeStaleScope(scope);
      const outcome = await this.repository.insert(doc);
      const stored = this.settle(doc, outcome);
      if (stored) return stored;
      if (outcome.kind === 'dedupe-clash') clash = outcome.error;
    }
    throw new DedupeKeyContendedError(doc.name, doc.dedupeKey as string, DEDUPE_WRITE_TRIES, { cause: clash });
  }

  /** Wakes an idle poll loop here and emits `enqueued` for each job stored (a deduplicated one was announced). */
  private announce(results: EnqueueResult[]): void {
    if (!results.some((result) => !result.deduplicated)) return;
    this.runner.notifyEnqueued();
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
