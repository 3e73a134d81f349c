import type { Types } from 'mongoose';
import type { FleetLimits } from '../handlers/fleet-limits.js';
import type { ClaimedJob, ClaimedRow } from '../model/claimed-job.js';
import { addMs, now } from '../model/clock.js';
import type { ByIdScope, ClaimSource } from '../persistence/claim-queries.js';
import { type ClaimRefusal, isRefusal } from '../persistence/claim-refusal.js';
import type { JobClaimStore } from '../persistence/job-claim.store.js';
import type { JobReadStore } from '../persistence/job-read.store.js';
import type { ClaimsInDoubt } from './claims-in-doubt.js';
import type { LimitedClaim, LimitedTakeResult } from './limited-claim.js';
import type { LockIdSequence } from './lock-id.js';
import type { RefusedRows, RetriedRow } from './refused-rows.js';

/**
 * What `claimById` did: claimed the row, dead-lettered it (its lost attempt was its last), set it aside as `failed`
 * (the server refuses to claim it as stored), or found nothing to take.
 */
export type ClaimByIdResult =
  | { kind: 'claimed'; claim: ClaimedJob }
  | { kind: 'dead_lettered'; doc: ClaimedRow }
  | { kind: 'set_aside'; reason: string }
  /** Its name is at a fleet-wide limit (`globalConcurrency`, `groupConcurrency` for its group, or `rateLimit`). */
  | { kind: 'limited' }
  | { kind: 'missed' };

/** `runNow` looks for a due row first, then for an expired lease. */
const SOURCES_BY_ID: readonly ClaimSource[] = ['pending', 'running'];

/** What `ClaimById` needs of the claim service that owns it. */
export interface ClaimByIdContext {
  claims: JobClaimStore;
  reads: JobReadStore;
  limitedClaim: LimitedClaim;
  inDoubt: ClaimsInDoubt;
  refused: RefusedRows;
  lockIds: LockIdSequence;
  leaseMs: number;
  /** Every name with a handler in this process, but the paused ones. */
  handledNames(): string[];
  /** The fleet-wide limits of `name`, when it has any and runs here; `hasLimitedNames`: whether any name does. */
  limitsOf(name: string): FleetLimits | undefined;
  hasLimitedNames(): boolean;
  byIdScope(source: ClaimSource, names: string[]): ByIdScope;
  /** False (and the row dead-lettered) when a reclaim's lost attempt was the job's last. */
  keepReclaimed(claim: ClaimedJob, at: Date): Promise<boolean>;
}

/** `runNow`'s claim of exactly one job, by id (see `JobClaimService.claimById`). */
export class ClaimById {
  constructor(private readonly context: ClaimByIdContext) {}

  /**
   * Claims exactly this job when it is pending and due, or takes it over like a reclaim when it is running with an
   * expired lease (dead-lettering it if that lost attempt was its last). A row the server refuses to take as stored
   * is set aside as `failed`. Only names with a handler in this process are taken; `runOnly` does not apply.
   */
  async claim(id: Types.ObjectId): Promise<ClaimByIdResult> {
    const { claims, reads, inDoubt, refused, lockIds, leaseMs } = this.context;
    const names = this.context.handledNames();
    const row = this.context.hasLimitedNames() ? await reads.findById(id) : null;
    if (row && !names.includes(row.name)) return { kind: 'missed' }; // no handler here, or paused
    const limits = row ? this.context.limitsOf(row.name) : undefined;
    if (row && limits) return this.claimLimited(id, row.name, limits);
    for (const source of SOURCES_BY_ID) {
      const at = now();
      const lockId = lockIds.next();
      const lockedUntil = addMs(at, leaseMs);
      const outcome = await inDoubt.send(
        { lockId, lockedUntil },
        () => claims.takeById(source, id, at, lockId, lockedUntil, this.context.byIdScope(source, names)),
        (taken): ClaimedRow | ClaimRefusal | null => taken,
      );
      let taken: RetriedRow;
      if (!isRefusal(outcome)) taken = outcome ? { doc: outcome, lockId } : 'changed';
      else {
        await refused.assertAboutARow(source, outcome, names);
        const found = await reads.findById(id);
        if (!found) return { kind: 'missed' };
        taken = await refused.retryRow(source, found, outcome, this.context.byIdScope(source, names));
      }
      if (taken === 'changed') continue;
      if ('setAside' in taken)
        return taken.setAside ? { kind: 'set_aside', reason: taken.setAside } : { kind: 'missed' };
      if (source === 'pending' || (await this.context.keepReclaimed(taken, now())))
        return { kind: 'claimed', claim: taken };
      return { kind: 'dead_lettered', doc: taken.doc };
    }
    return { kind: 'missed' };
  }

  /** `claim` for a name with fleet-wide limits: the row takes its slots (and a rate token) like any claim. */
  private async claimLimited(id: Types.ObjectId, name: string, limits: FleetLimits): Promise<ClaimByIdResult> {
    const { limitedClaim, inDoubt, refused, lockIds, leaseMs } = this.context;
    for (const source of SOURCES_BY_ID) {
      const at = now();
      const lockId = lockIds.next();
      const lockedUntil = addMs(at, leaseMs);
      const skipIds = refused.skipIds();
      const { skipLocks } = this.context.byIdScope(source, [name]);
      const result = await inDoubt.send(
        { lockId, lockedUntil },
        () => limitedClaim.take({ name, limits, source, at, lockId, lockedUntil, skipIds, skipLocks, id }),
        (doc): LimitedTakeResult => ({ kind: 'taken', doc, reclaimed: source === 'running' }),
      );
      if (result.kind === 'full' || result.kind === 'contended') return { kind: 'limited' };
      if (result.kind === 'none') continue;
      if (result.kind === 'refused_unplaced') throw result.refusal.error;
      if (result.kind === 'refused') {
        const reason = await refused.setAsideRefused(result.source, { _id: result.id, name }, result.refusal);
        return reason ? { kind: 'set_aside', reason } : { kind: 'missed' };
      }
      const claim = { doc: result.doc, lockId };
      if (!result.reclaimed || (await this.context.keepReclaimed(claim, now()))) return { kind: 'claimed', claim };
      return { kind: 'dead_lettered', doc: result.doc };
    }
    return { kind: 'missed' };
  }
}
