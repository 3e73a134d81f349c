import type { Logger } from '@nestjs/common';
import { Types } from 'mongoose';
import type { ClaimedJob } from '../model/claimed-job.js';
import { addMs, now } from '../model/clock.js';
import { errorInfo } from '../model/error-info.js';
import type { JobEvents } from '../model/events/job-events.js';
import type { ByIdScope, ClaimSource } from '../persistence/claim-queries.js';
import { type ClaimRefusal, isRefusal, isSameRefusal } from '../persistence/claim-refusal.js';
import { classifyWriteError } from '../persistence/database-errors.js';
import type { JobClaimStore } from '../persistence/job-claim.store.js';
import type { ClaimsInDoubt } from './claims-in-doubt.js';
import type { LockIdSequence } from './lock-id.js';
import { SetAsideIds } from './set-aside-ids.js';

/** Refused rows remembered in memory when the server refuses to mark them `failed` too (each one is in every claim's filter). */
const SET_ASIDE_MEMORY = 100;

/** A row a claim found: its id and name. */
export type FoundRow = { _id: Types.ObjectId; name: string };

/** What a retried take of one refused row did: took it, found it changed, or set it aside (its reason; null: not). */
export type RetriedRow = ClaimedJob | 'changed' | { setAside: string | null };

/** What `RefusedRows` needs of the claim service that owns it. */
export interface RefusedRowsContext {
  claims: JobClaimStore;
  /** The retention stamp of a row set aside as `failed` at `at` (none: kept). */
  failedExpiry(row: FoundRow, at: Date): Date | undefined;
  events: JobEvents;
  logger: Logger;
  lockIds: LockIdSequence;
  leaseMs: number;
  /** The retried take is a claim like any other: an answer lost after it landed is read back, not forgotten. */
  inDoubt: ClaimsInDoubt;
}

/**
 * Rows the server refuses to claim as stored (see `ClaimRefusal`). Such a row would sort first on every poll and stall
 * the queue, so a refusal is pinned on one row (the same write on exactly that row is refused the same way) and the
 * row set aside as `failed`; when that write is refused too, the row is skipped in memory (`skipIds`). A refusal that
 * holds for a row that does not exist is about the update itself, not a row: it is thrown, and no row is failed.
 */
export class RefusedRows {
  private readonly skipped = new SetAsideIds(SET_ASIDE_MEMORY);
  /** Set-aside writes under way, by row id: a second claim step that hits the same refused row waits for the first. */
  private readonly settingAside = new Map<string, Promise<string | null>>();

  constructor(private readonly context: RefusedRowsContext) {}

  /** Rows every claim skips: refused, and refused to be marked `failed` too. Callers must not change the list. */
  skipIds(): readonly Types.ObjectId[] {
    return this.skipped.values();
  }

  /**
   * Throws `refusal` when the same write refuses a row that does not exist: then the server objects to the update
   * itself, not to a row, and marking rows `failed` would fail healthy jobs.
   */
  async assertAboutARow(source: ClaimSource, refusal: ClaimRefusal, names: string[]): Promise<void> {
    const at = now();
    const { claims, lockIds } = this.context;
    const outcome = await claims.takeById(source, new Types.ObjectId(), at, lockIds.next(), at, { names });
    if (isRefusal(outcome)) throw refusal.error;
  }

  /**
   * Repeats a refused take on exactly this row. Success means the refusal was about something else (the row is ours
   * now); no match means the row changed state meanwhile; the same refusal (same code) confirms the row is the
   * culprit, and it is set aside. Another refusal is thrown.
   */
  async retryRow(source: ClaimSource, row: FoundRow, refusal: ClaimRefusal, scope: ByIdScope): Promise<RetriedRow> {
    const at = now();
    const lockId = this.context.lockIds.next();
    const lockedUntil = addMs(at, this.context.leaseMs);
    const outcome = await this.context.inDoubt.send(
      { lockId, lockedUntil },
      () => this.context.claims.takeById(source, row._id, at, lockId, lockedUntil, scope),
      (taken) => taken,
    );
    if (!isRefusal(outcome)) return outcome ? { doc: outcome, lockId } : 'changed';
    if (!isSameRefusal(outcome, refusal)) throw outcome.error;
    return { setAside: await this.setAside(source, row, outcome.error.message, at) };
  }

  /** Sets aside a row whose take the server refused (see `retryRow`), once the refusal is known to be about a row. */
  async setAsideRefused(source: ClaimSource, row: FoundRow, refusal: ClaimRefusal): Promise<string | null> {
    await this.assertAboutARow(source, refusal, [row.name]);
    return this.setAside(source, row, refusal.error.message, now());
  }

  /**
   * Marks a refused row `failed`; resolves the reason, or null when the row no longer matched or the server refused
   * that write too for its document (the row is then skipped in memory). Any other failure of that write (network,
   * an unfamiliar server code) is thrown: the row is probed again on a later poll. A concurrent claim step that hits
   * the same row waits for the first one's write (which alone logs and emits), and a row already skipped in memory is
   * not written again.
   */
  private setAside(source: ClaimSource, row: FoundRow, cause: string, at: Date): Promise<string | null> {
    const jobId = row._id.toHexString();
    const underWay = this.settingAside.get(jobId);
    if (underWay) return underWay.catch(() => null);
    if (this.skipped.has(row._id)) return Promise.resolve(null);
    const write = this.writeSetAside(source, row, cause, at).finally(() => this.settingAside.delete(jobId));
    this.settingAside.set(jobId, write);
    return write;
  }

  private async writeSetAside(source: ClaimSource, row: FoundRow, cause: string, at: Date): Promise<string | null> {
    const { claims, logger, events } = this.context;
    const jobId = row._id.toHexString();
    const reason = `Job could not be ${source === 'pending' ? 'claimed' : 'reclaimed'}: the server rejected the update as stored (${cause})`;
    try {
      const expiresAt = this.context.failedExpiry(row, at);
      if (!(await claims.setAside(row._id, source, reason, at, expiresAt))) return null;
    } catch (error) {
      if (classifyWriteError(error) !== 'permanent') throw error;
      this.skipped.add(row._id);
      logger.error(
        `Job ${jobId} (${row.name}) is skipped by this worker: ${reason}; marking it failed was refused too (${errorInfo(error).message})`,
      );
      return null;
    }
    logger.error(`Job ${jobId} (${row.name}) marked failed: ${reason}`);
    events.emit('failed', { jobId, name: row.name, attempt: 0 }, reason);
    return reason;
  }
}
