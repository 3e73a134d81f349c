import { Injectable } from '@nestjs/common';
import type { Types } from 'mongoose';
import type { FleetLimits } from '../handlers/fleet-limits.js';
import type { ClaimedRow } from '../model/claimed-job.js';
import type { JobDocument } from '../model/job-document.js';
import { type ClaimSource, isInSource, type SlotClaim, type SlotField } from '../persistence/claim-queries.js';
import { asRefusal, type ClaimRefusal, isRefusal, isSameRefusal } from '../persistence/claim-refusal.js';
import { mayHaveLanded } from '../persistence/database-errors.js';
import { isSlotClash } from '../persistence/duplicate-key.js';
import { JobClaimStore } from '../persistence/job-claim.store.js';
import { JobReadStore } from '../persistence/job-read.store.js';
import { RateTokensRepository, type TakenToken } from './rate-tokens.repository.js';
import { isMalformedGroup } from './runnable-row.js';
import { slotPrefix } from './slot-keys.js';
import { SlotView } from './slot-view.js';

/** One claim of a limited name, as the claim service asks for it. */
export interface LimitedTake {
  name: string;
  limits: FleetLimits;
  source: ClaimSource;
  at: Date;
  lockId: string;
  lockedUntil: Date;
  skipIds: readonly Types.ObjectId[];
  /** A reclaim's own process's claims still unanswered: rows under these locks are not taken over. */
  skipLocks?: readonly string[];
  /** `runNow`: exactly this row, or nothing. */
  id?: Types.ObjectId;
  /**
   * Shutdown has begun: checked before every write that could take a row, so that a take whose earlier commands (a
   * rate token, the slot holders) were answered after it began sends nothing more (its token is given back). A row
   * taken then could only be handed back, and if that answer is lost too it is charged an attempt (long seed 4403).
   */
  stopped?: () => boolean;
}

/**
 * What one try did: took a row (`reclaimed`: an expired running row, whose lost attempt counts), found the name at
 * its limit (`full`), found no row, lost a race for a slot or row to another claimer (`contended`: try again), or
 * had its write refused by the server for exactly row `id` of `source` (`refused`: the row cannot be taken as stored; the caller
 * sets it aside, else it would sort first on every claim of the name and stall it), or for no row it could name
 * (`refused_unplaced`).
 */
export type LimitedTakeResult =
  | { kind: 'taken'; doc: ClaimedRow; reclaimed: boolean }
  | { kind: 'full' }
  | { kind: 'none' }
  | { kind: 'contended' }
  | { kind: 'refused'; id: Types.ObjectId; source: ClaimSource; refusal: ClaimRefusal }
  /** The server refused a claim write, and no one row could be named as its cause (see `JobClaimService`). */
  | { kind: 'refused_unplaced'; refusal: ClaimRefusal };

/**
 * The claim of a name with fleet-wide limits. The limits live in MongoDB, not in agreement between processes:
 * - `rateLimit`: a start token (`RateTokensRepository`) is taken first and given back when no row is taken;
 * - `globalConcurrency`/`groupConcurrency`: the claim write sets the row's `concurrencySlot`/`groupSlot` to a slot
 *   key no other row holds, and the unique indexes on those fields refuse a second holder. A row keeps its slots
 *   while it runs (and after a cancel, until its old lease runs out), and every write that ends the run unsets them.
 * A slot whose holder has ended is freed before it is reused; a running holder whose lease ran out is reclaimed with
 * its slots, first.
 */
@Injectable()
export class LimitedClaim {
  private readonly tokensEnsured = new Map<string, Promise<void>>();

  constructor(
    private readonly claims: JobClaimStore,
    private readonly reads: JobReadStore,
    private readonly tokens: RateTokensRepository,
  ) {}

  async take(request: LimitedTake): Promise<LimitedTakeResult> {
    try {
      return await this.takeOrRefuse(request);
    } catch (error) {
      const refusal = asRefusal(error);
      if (!refusal) throw error;
      return { kind: 'refused_unplaced', refusal };
    }
  }

  /** `take`, throwing a refusal it could not pin on one row. */
  private async takeOrRefuse(request: LimitedTake): Promise<LimitedTakeResult> {
    // runNow: a row that is not there to take from `source` is no matter of limits (nor of a rate token).
    let row: JobDocument | undefined;
    if (request.id !== undefined) {
      const found = await this.reads.findById(request.id);
      if (!found || found.name !== request.name || !isInSource(found, request.source, request.at)) {
        return { kind: 'none' };
      }
      row = found;
    }
    const { rateLimit } = request.limits;
    let token: TakenToken | null = null;
    if (rateLimit) {
      await this.ensureTokens(request.name, rateLimit.max);
      token = await this.tokens.take(request.name, rateLimit, request.at);
      if (!token) return { kind: 'full' };
    }
    let result: LimitedTakeResult;
    try {
      result = request.stopped?.() ? { kind: 'none' } : await this.takeWithSlots(request, row);
    } catch (error) {
      // A claim that may have landed (its answer lost) keeps its token: the caller reads the row back and may run it,
      // and a start without its token could exceed the rate. A token kept for nothing costs one start of a window.
      if (token && !mayHaveLanded(error)) await this.tokens.giveBack(token).catch(() => undefined);
      if (isSlotClash(error)) return { kind: 'contended' };
      throw error;
    }
    if (token && result.kind !== 'taken') await this.tokens.giveBack(token);
    return result;
  }

  /** Creates a rate-limited name's tokens once per process, at its first claim (again after a failure). */
  private ensureTokens(name: string, max: number): Promise<void> {
    let ensured = this.tokensEnsured.get(name);
    if (!ensured) {
      ensured = this.tokens.ensureTokens(name, max);
      this.tokensEnsured.set(name, ensured);
      ensured.catch(() => this.tokensEnsured.delete(name));
    }
    return ensured;
  }

  /** `byId`: runNow's row, read by `take` (in `request.source`'s state then). */
  private async takeWithSlots(request: LimitedTake, byId?: JobDocument): Promise<LimitedTakeResult> {
    const { name, limits, source, at, lockId, lockedUntil, skipIds, skipLocks } = request;
    const inDoubtHere = (lock: string | undefined) => lock !== undefined && (skipLocks ?? []).includes(lock);
    const taken = (doc: ClaimedRow | RefusedRow | null, missing: 'none' | 'contended' = 'none'): LimitedTakeResult => {
      if (doc === null) return { kind: missing };
      return 'kind' in doc ? doc : { kind: 'taken', doc, reclaimed: source === 'running' };
    };
    const stopped = () => request.stopped?.() === true;
    const takeExactly = async (id: Types.ObjectId, slots?: SlotClaim) =>
      stopped()
        ? null
        : refusedAs(
            id,
            source,
            await this.claims.takeById(source, id, at, lockId, lockedUntil, { names: [name], skipLocks }, slots),
          );
    // runNow of an expired running row that holds slots: reclaimed with them, like the holders below (it may hold
    // the only one). No match: the row changed state since it was read, and its new state is the answer.
    if (byId && source === 'running' && (byId.concurrencySlot !== undefined || byId.groupSlot !== undefined)) {
      return taken(await takeExactly(byId._id));
    }
    /** `group`: only rows of that group (null: without one); nothing left there is `contended` (others may have rows). */
    const takeRow = async (slots?: SlotClaim, group?: string | null): Promise<LimitedTakeResult> => {
      if (stopped()) return { kind: 'none' };
      if (request.id !== undefined) return taken(await takeExactly(request.id, slots));
      const scope = { names: [name], skipIds, skipLocks, group };
      const doc = await this.claims.take(source, at, lockId, lockedUntil, scope, slots);
      if (!isRefusal(doc)) return taken(doc, group === undefined ? 'none' : 'contended');
      // Which row was refused: the one this take would find, when the same write on exactly it is refused the same.
      const row = await this.claims.peek(source, at, scope);
      if (!row) throw doc.error;
      const retried = await takeExactly(row._id, slots);
      if (retried !== null && 'kind' in retried && !isSameRefusal(retried.refusal, doc)) throw retried.refusal.error;
      return taken(retried, 'contended');
    };
    if (limits.globalConcurrency === undefined && limits.groupConcurrency === undefined) return takeRow();
    const fields: SlotField[] = [];
    if (limits.globalConcurrency !== undefined) fields.push('concurrencySlot');
    if (limits.groupConcurrency !== undefined) fields.push('groupSlot');
    const holders = await this.claims.findSlotHolders(slotPrefix(name), fields);
    const view = new SlotView(name, limits, holders, at);
    // A holder whose lease ran out is taken over with its slots before any slot is given to a new row (not one under a
    // claim of this process still unanswered: its slots stay held until that claim is resolved).
    for (const holder of request.id === undefined ? view.expired : []) {
      if (stopped()) return { kind: 'none' };
      if (inDoubtHere(holder.lockedBy)) continue;
      const doc = refusedAs(
        holder._id,
        'running',
        await this.claims.takeById('running', holder._id, at, lockId, lockedUntil, { names: [name], skipLocks }),
      );
      if (doc && 'kind' in doc) return doc;
      if (doc) return { kind: 'taken', doc, reclaimed: true };
    }
    await this.claims.freeEndedSlots('concurrencySlot', view.endedConcurrencySlots, at);
    await this.claims.freeEndedSlots('groupSlot', view.endedGroupSlots, at);
    const concurrencySlot = view.freeConcurrencySlot();
    if (concurrencySlot === null) return { kind: 'full' };
    if (limits.groupConcurrency === undefined) return takeRow({ concurrencySlot });
    // The group slot depends on the group: find the first row outside the full groups, then take the first row of its
    // group (claims in flight that found the same row take that group's next ones instead of racing for one row).
    const row =
      byId ?? (await this.claims.peekOutsideGroups(source, at, name, view.fullGroups(), { skipIds, skipLocks }));
    if (!row) return { kind: 'none' };
    const groupSlot = view.freeGroupSlot(row.group);
    if (groupSlot === null) return { kind: 'full' };
    const slots: SlotClaim = {};
    if (concurrencySlot !== undefined) slots.concurrencySlot = concurrencySlot;
    if (typeof groupSlot === 'string') slots.groupSlot = groupSlot;
    if (byId) return taken(await takeExactly(row._id, slots));
    // A group of the wrong type (written by another tool) is no filter to take "its group's next row" by: this very row
    // is taken, without a group slot, and the runner sets it aside (`whyNotRunnable`) instead of it stalling the name.
    if (isMalformedGroup(row.group)) return taken(await takeExactly(row._id, slots), 'contended');
    return takeRow(slots, row.group ?? null);
  }
}

type RefusedRow = Extract<LimitedTakeResult, { kind: 'refused' }>;

/** A take of exactly row `id`: a refusal by the server of that write becomes a `refused` result for it. */
function refusedAs(id: Types.ObjectId, source: ClaimSource, outcome: ClaimedRow | ClaimRefusal | null) {
  return isRefusal(outcome) ? ({ kind: 'refused', id, source, refusal: outcome } satisfies RefusedRow) : outcome;
}
