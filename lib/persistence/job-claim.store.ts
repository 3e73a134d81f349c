import { Inject, Injectable } from '@nestjs/common';
import type { Model, mongo, Types } from 'mongoose';
import { CLAIMED_ROW_PROJECTION, type ClaimedRow } from '../model/claimed-job.js';
import type { JobDocument } from '../model/job-document.js';
import { JOBS_MODEL } from '../model/jobs.constants.js';
import {
  type ByIdScope,
  byIdScopeFilter,
  CLAIM_SOURCES,
  type ClaimScope,
  type ClaimSource,
  escapeRegex,
  SLOT_HOLDER_FIELDS,
  type SlotClaim,
  type SlotField,
  type SlotHolder,
  scopeFilter,
  withSlots,
} from './claim-queries.js';
import { type ClaimRefusal, refusalAsOutcome } from './claim-refusal.js';
import { statementRefusal } from './database-errors.js';
import { failedUpdate } from './finishing-updates.js';
import { jobsCollection } from './jobs-collection.js';
import { PlainCommands } from './plain-commands.js';
import { LOCK_FIELDS } from './row-fields.js';

/** Moves rows into `running` for a worker: claim steps, fleet-limit slots, refused rows, claims in doubt. */
@Injectable()
export class JobClaimStore {
  private readonly collection: mongo.Collection<JobDocument>;
  private readonly commands: PlainCommands;

  constructor(@Inject(JOBS_MODEL) model: Model<JobDocument>) {
    this.collection = jobsCollection(model);
    this.commands = PlainCommands.of(model);
  }

  /**
   * One claim step: takes the first row of `source` in scope (`pending`: due, by priority desc, runAt asc, _id asc;
   * `running`: lease run out, oldest deadline first, counting the lost attempt) for `lockId` until `lockedUntil`.
   * Resolves the row taken, null when none was there, or a `ClaimRefusal` when the server refused to update the row
   * it matched.
   */
  take(
    source: ClaimSource,
    now: Date,
    lockId: string,
    lockedUntil: Date,
    scope: ClaimScope,
    slots?: SlotClaim,
  ): Promise<ClaimedRow | ClaimRefusal | null> {
    const query = CLAIM_SOURCES[source];
    return refusalAsOutcome(() =>
      this.collection.findOneAndUpdate(
        { ...query.filter(now), ...scopeFilter(scope) },
        withSlots(query.update(now, lockId, lockedUntil), slots),
        { sort: query.sort, returnDocument: 'after', projection: CLAIMED_ROW_PROJECTION },
      ),
    );
  }

  /** The row (id, name) `take` would take next, read without writing: finds a row the server refuses. */
  peek(source: ClaimSource, now: Date, scope: ClaimScope): Promise<Pick<JobDocument, '_id' | 'name'> | null> {
    const query = CLAIM_SOURCES[source];
    return this.collection.findOne<Pick<JobDocument, '_id' | 'name'>>(
      { ...query.filter(now), ...scopeFilter(scope) },
      { sort: query.sort, projection: { _id: 1, name: 1 } },
    );
  }

  /**
   * The earliest `runAt` among pending rows in scope, due or not (null: none is pending): when an idle worker's next
   * job falls due. Meant to be served by `next_due` (`{name: 1, runAt: 1}` over pending rows: one scan per name,
   * merged in `runAt` order, the first key read answers).
   */
  async earliestRunAt(scope: ClaimScope): Promise<Date | null> {
    const row = await this.collection.findOne<Pick<JobDocument, 'runAt'>>(
      { status: 'pending', ...scopeFilter(scope) },
      { sort: { runAt: 1 }, projection: { _id: 0, runAt: 1 } },
    );
    return row?.runAt instanceof Date ? row.runAt : null;
  }

  /**
   * The first `limit` due rows (ids and names) `take('pending')` would take, in claim order: the candidates of a batch
   * claim (`takeEach`).
   */
  peekDue(now: Date, scope: ClaimScope, limit: number): Promise<Pick<JobDocument, '_id' | 'name'>[]> {
    const query = CLAIM_SOURCES.pending;
    // Ids and names of at most MAX_CLAIM_BATCH_SIZE rows: a few kilobytes, always one reply.
    return this.commands.findFirstBatch<Pick<JobDocument, '_id' | 'name'>>({
      filter: { ...query.filter(now), ...scopeFilter(scope) },
      sort: query.sort,
      limit,
      batchSize: limit,
      projection: { _id: 1, name: 1 },
    });
  }

  /**
   * A batch claim in one command: each of these rows that is still due and in scope is taken for its own lock id
   * until `lockedUntil`, as `take('pending')` takes one (one unordered `update` of single-row statements; rows taken
   * meanwhile by others are skipped). The server answers only how many it took; `findClaimedByAny` reads which.
   * Resolves how many matched and the statements refused for their row (by index); rejects as
   * `PlainCommands.sendUpdates` does when the command failed, and as maybe applied when a statement was refused for a
   * reason not about its row (the caller then reads back by lock id).
   */
  async takeEach(
    rows: readonly { id: Types.ObjectId; lockId: string }[],
    now: Date,
    lockedUntil: Date,
    scope: ClaimScope,
  ): Promise<{ matched: number; refused: Map<number, Error> }> {
    const query = CLAIM_SOURCES.pending;
    const answer = await this.commands.sendUpdates(
      rows.map(({ id, lockId }) => ({
        q: { ...query.filter(now), ...scopeFilter(scope), _id: id },
        u: query.update(now, lockId, lockedUntil),
      })),
    );
    // A refusal not about its row leaves the count in doubt (see `statementRefusal`): read back by lock id.
    for (const refusal of answer.refused.values()) {
      const taken = statementRefusal(refusal);
      if (taken !== refusal) throw taken;
    }
    return answer;
  }

  /**
   * The rows a batch claim took and nothing changed since (`findClaimedBy` for each row and the lock id sent for it, all
   * of one deadline), in claim order: point lookups by `_id`, from the primary, which has the batch's writes (an
   * application's secondary read preference must not hide them). `taken`, when the claim's answer said how many rows
   * it took, lets one reply do: rows with large payloads may not fit in one (16 MiB), and only the count tells a reply
   * cut short from rows changed since; short of it (or without it), a cursor reads them all.
   */
  async findClaimedByAny(
    claims: readonly { id: Types.ObjectId; lockId: string }[],
    lockedUntil: Date,
    taken?: number,
  ): Promise<ClaimedRow[]> {
    const filter = {
      _id: { $in: claims.map((claim) => claim.id) },
      status: 'running',
      lockedUntil,
      lockedBy: { $in: claims.map((claim) => claim.lockId) },
    } as const;
    const sort = CLAIM_SOURCES.pending.sort;
    if (taken !== undefined) {
      const rows = await this.commands.findFirstBatch<ClaimedRow>({
        filter,
        sort,
        projection: CLAIMED_ROW_PROJECTION,
        limit: claims.length,
        batchSize: claims.length,
      });
      if (rows.length === taken) return rows;
    }
    return this.collection
      .find<ClaimedRow>(filter, {
        sort,
        projection: CLAIMED_ROW_PROJECTION,
        // As the plain read: the rows this worker just wrote, whatever the application's read concern.
        readPreference: 'primary',
        readConcern: { level: 'local' },
        batchSize: claims.length,
      })
      .toArray();
  }

  /** `take` for exactly this row, if it is in `source` as `take` would find it and is in `scope`; same outcomes. */
  takeById(
    source: ClaimSource,
    id: Types.ObjectId,
    now: Date,
    lockId: string,
    lockedUntil: Date,
    scope: ByIdScope,
    slots?: SlotClaim,
  ): Promise<ClaimedRow | ClaimRefusal | null> {
    const query = CLAIM_SOURCES[source];
    return refusalAsOutcome(() =>
      this.collection.findOneAndUpdate(
        { _id: id, ...query.filter(now), ...byIdScopeFilter(scope) },
        withSlots(query.update(now, lockId, lockedUntil), slots),
        { returnDocument: 'after', projection: CLAIMED_ROW_PROJECTION },
      ),
    );
  }

  /**
   * The first row of `name` in `source` as `take` would find it, except rows of the `fullGroups` (a limited name's
   * claim learns the row's group before it picks the group slot to take with it).
   */
  peekOutsideGroups(
    source: ClaimSource,
    now: Date,
    name: string,
    fullGroups: readonly string[],
    scope: Pick<ClaimScope, 'skipIds' | 'skipLocks'>,
  ): Promise<Pick<JobDocument, '_id' | 'group'> | null> {
    const query = CLAIM_SOURCES[source];
    return this.collection.findOne<Pick<JobDocument, '_id' | 'group'>>(
      {
        ...query.filter(now),
        ...scopeFilter({ names: [name], ...scope }),
        ...(fullGroups.length > 0 ? { group: { $nin: [...fullGroups] } } : {}),
      },
      { sort: query.sort, projection: { _id: 1, group: 1 } },
    );
  }

  /**
   * The rows holding a slot of a name (keys starting with its `slotPrefix`) in the given fields. Each field's branch is
   * an anchored prefix, so a range scan of its unique index bounded by the slots held, whatever the limit.
   */
  findSlotHolders(prefix: string, fields: readonly SlotField[]): Promise<SlotHolder[]> {
    const pattern = `^${escapeRegex(prefix)}`;
    const branches = fields.map((field): mongo.Filter<JobDocument> => ({ [field]: { $regex: pattern } }));
    if (branches.length === 0) return Promise.resolve([]);
    return this.collection
      .find<SlotHolder>(branches.length === 1 ? branches[0] : { $or: branches }, { projection: SLOT_HOLDER_FIELDS })
      .toArray();
  }

  /**
   * Frees slots whose holder has left `running` and whose last lease has run out (a row cancelled while running
   * keeps its slots until its old `lockedUntil`). A running holder is never freed here: its lease is renewed, or it
   * is reclaimed with its slots when it runs out.
   */
  async freeEndedSlots(field: SlotField, keys: readonly string[], now: Date): Promise<void> {
    if (keys.length === 0) return;
    await this.collection.updateMany(
      { [field]: { $in: [...keys] }, status: { $ne: 'running' }, lockedUntil: { $not: { $gt: now } } },
      { $unset: { [field]: '' } },
    );
  }

  /**
   * Moves a row the server refuses to take from `source` to `failed`, with only `$set`/`$unset` of top-level fields:
   * the update that failed was an `$inc`/`$push` on a malformed field. False when the row no longer matches the
   * search that found it.
   */
  async setAside(
    id: Types.ObjectId,
    source: ClaimSource,
    reason: string,
    now: Date,
    expiresAt?: Date,
  ): Promise<boolean> {
    const result = await this.collection.updateOne(
      { _id: id, ...CLAIM_SOURCES[source].filter(now) },
      failedUpdate(reason, now, expiresAt),
    );
    return result.matchedCount === 1;
  }

  /**
   * The row a claim for `lockId` took, if it landed and nothing changed the row since: a claim in doubt (its answer
   * was lost) read back. `lockedUntil` is the deadline that claim wrote, so the read is a point lookup on the reclaim
   * index (`status`, `lockedUntil`); nobody renews a lease its owner does not know it holds.
   */
  findClaimedBy(lockId: string, lockedUntil: Date): Promise<ClaimedRow | null> {
    return this.collection.findOne<ClaimedRow>(
      { status: 'running', lockedUntil, lockedBy: lockId },
      { projection: CLAIMED_ROW_PROJECTION, readPreference: 'primary' },
    );
  }

  /**
   * Gives back, untouched, the row a claim in doubt took if it is still under that claim's lock (same filter as
   * `findClaimedBy`): pending again, no attempt counted. Safe after the lease ran out: a reclaim writes another lock id,
   * so at most one of the two matches. Whether a row was handed back.
   */
  async handBackClaimed(lockId: string, lockedUntil: Date, now: Date): Promise<boolean> {
    const result = await this.collection.updateOne(
      { status: 'running', lockedUntil, lockedBy: lockId },
      { $set: { status: 'pending', runAt: now, updatedAt: now, finishedBy: lockId }, $unset: LOCK_FIELDS },
    );
    return result.matchedCount === 1;
  }
}
