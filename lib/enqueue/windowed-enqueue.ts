import { Injectable } from '@nestjs/common';
import type { ClientSession } from 'mongoose';
import { now } from '../model/clock.js';
import { DedupeKeyContendedError } from '../model/errors/dedupe-key-contended.error.js';
import { DEDUPE_WRITE_TRIES } from '../model/jobs.constants.js';
import type { NewJobDocument } from '../model/new-job-document.js';
import { JobWindowStore } from '../persistence/job-window.store.js';
import type { EnqueueResult } from './enqueue-result.js';

/**
 * Stores a throttled or debounced job, settling races with other enqueues of its key through the unique index on its
 * scope (never through this process's memory): a throttle window is taken by one upsert, forever; a debounce key is
 * replaced in place while its job is pending, and taken by an upsert when no job holds it.
 */
@Injectable()
export class WindowedEnqueue {
  constructor(private readonly windows: JobWindowStore) {}

  /** Whether `doc` is throttled or debounced (and so stored here rather than by insert). */
  static isWindowed(doc: NewJobDocument): boolean {
    return doc.throttleScope !== undefined || doc.debounceScope !== undefined;
  }

  store(doc: NewJobDocument, session: ClientSession | undefined): Promise<EnqueueResult> {
    return doc.throttleScope === undefined ? this.debounce(doc, session) : this.throttle(doc, session);
  }

  /** One command: the window's job, stored by this call or by an earlier one. */
  private async throttle(doc: NewJobDocument, session: ClientSession | undefined): Promise<EnqueueResult> {
    let race: unknown;
    for (let tries = 0; tries < DEDUPE_WRITE_TRIES; tries += 1) {
      const taken = await this.windows.take(doc, 'throttleScope', session);
      if (taken.kind === 'inserted') return { doc: taken.doc, deduplicated: false };
      if (taken.kind === 'held') return { doc: taken.holder, deduplicated: true };
      race = taken.error;
    }
    throw contended(doc, 'throttle.key', race);
  }

  /**
   * One command while a job holds the key (the replacement), two for the enqueue that stores the job. A holder past
   * its `maxWaitMs` deadline is read by the upsert and replaced by id, keeping that deadline.
   */
  private async debounce(doc: NewJobDocument, session: ClientSession | undefined): Promise<EnqueueResult> {
    const scope = doc.debounceScope as string;
    let race: unknown;
    for (let tries = 0; tries < DEDUPE_WRITE_TRIES; tries += 1) {
      const replaced = await this.windows.replace(doc, scope, doc.runAt, now(), session);
      if (replaced) return { doc: replaced, deduplicated: true };
      const taken = await this.windows.take(doc, 'debounceScope', session);
      if (taken.kind === 'inserted') return { doc: taken.doc, deduplicated: false };
      if (taken.kind === 'raced') {
        race = taken.error;
        continue;
      }
      const { holder } = taken;
      if (holder.status !== 'pending') {
        // Claimed by a worker of an older version, which left the key on the row: free it and take it.
        await this.windows.freeStaleDebounceScope(scope, session);
        continue;
      }
      const until = holder.debounceUntil?.getTime() ?? Number.POSITIVE_INFINITY;
      const runAt = new Date(Math.min(until, doc.runAt.getTime()));
      const moved = await this.windows.replace(doc, scope, runAt, now(), session, holder._id);
      if (moved) return { doc: moved, deduplicated: true };
      // Claimed between the two commands: the key is free now.
    }
    throw contended(doc, 'debounce.key', race);
  }
}

function contended(doc: NewJobDocument, option: 'throttle.key' | 'debounce.key', cause: unknown) {
  const key = JSON.parse((doc.throttleScope ?? doc.debounceScope) as string)[1] as string;
  return new DedupeKeyContendedError(doc.name, key, DEDUPE_WRITE_TRIES, { cause }, option);
}
