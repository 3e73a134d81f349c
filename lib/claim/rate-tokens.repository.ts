import { Inject, Injectable } from '@nestjs/common';
import { type Model, mongo } from 'mongoose';
import type { RateLimit } from '../handlers/fleet-limits.js';
import type { JobDocument } from '../model/job-document.js';
import { JOBS_MODEL, JOBS_RESOLVED_OPTIONS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { duplicateKeyErrorsOnly } from '../persistence/duplicate-key.js';
import { siblingCollection } from '../persistence/sibling-collection.js';

/**
 * One start token of a rate-limited name: `max` of them per name, each used at most once per `perMs`, so no window
 * of `perMs` holds more than `max` starts.
 */
export interface RateTokenDocument {
  /** `JSON.stringify([name, index])`. */
  _id: string;
  name: string;
  index: number;
  /** When the token was last used (the claimer's clock). */
  lastStartAt: Date;
}

/** A token taken for one start: given back (`giveBack`) when the claim then finds no row. */
export interface TakenToken {
  id: string;
  takenAt: Date;
  previous: Date;
}

/** Every query and update on `<collectionName>_rate_tokens`, next to the jobs collection. */
@Injectable()
export class RateTokensRepository {
  private readonly collection: mongo.Collection<RateTokenDocument>;

  constructor(
    @Inject(JOBS_MODEL) model: Model<JobDocument>,
    @Inject(JOBS_RESOLVED_OPTIONS) options: ResolvedJobsOptions,
  ) {
    this.collection = siblingCollection<RateTokenDocument>(model, options, 'rate_tokens');
  }

  /**
   * Creates the name's missing tokens (never used: `lastStartAt` at the epoch) and the index `take` uses. Any number
   * of processes may do this at once: an existing token is left as it is.
   */
  async ensureTokens(name: string, max: number): Promise<void> {
    await this.collection.createIndex({ name: 1, lastStartAt: 1 }, { name: 'free_tokens' });
    const ops = Array.from(
      { length: max },
      (_, index): mongo.AnyBulkWriteOperation<RateTokenDocument> => ({
        updateOne: {
          filter: { _id: JSON.stringify([name, index]) },
          update: { $setOnInsert: { name, index, lastStartAt: new Date(0) } },
          upsert: true,
        },
      }),
    );
    try {
      await this.collection.bulkWrite(ops, { ordered: false });
    } catch (error) {
      // Two processes upserting the same token at once: the other one created it.
      if (!duplicateKeyErrorsOnly(error)) throw error;
    }
  }

  /** Uses one of the name's tokens not used within the last `perMs`; null when all were. */
  async take(name: string, { max, perMs }: RateLimit, now: Date): Promise<TakenToken | null> {
    const before = await this.collection.findOneAndUpdate(
      { name, lastStartAt: { $lte: new Date(now.getTime() - perMs) }, index: { $lt: max } },
      { $set: { lastStartAt: now } },
      // Any token free for a window will do: no sort (on `free_tokens` the first key in range is the oldest anyway).
      { returnDocument: 'before', projection: { lastStartAt: 1 } },
    );
    return before && { id: before._id, takenAt: now, previous: before.lastStartAt };
  }

  /** Puts back a token no start used, unless it was used again since. */
  async giveBack(token: TakenToken): Promise<void> {
    await this.collection.updateOne(
      { _id: token.id, lastStartAt: token.takenAt },
      { $set: { lastStartAt: token.previous } },
    );
  }
}
