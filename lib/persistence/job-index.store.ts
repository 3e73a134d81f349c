import { Inject, Injectable } from '@nestjs/common';
import type { Model, mongo } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';
import { JOBS_MODEL } from '../model/jobs.constants.js';
import { classifyWriteError } from './database-errors.js';
import { dedupeScope } from './dedupe-scope.js';
import { codeOf, duplicateKeyErrorsOnly } from './duplicate-key.js';
import type { IndexInfo } from './guarantee-indexes.js';
import { jobsCollection } from './jobs-collection.js';
import { LIVE } from './row-fields.js';

const NAMESPACE_NOT_FOUND = 26;
const INDEX_NOT_FOUND = 27;

/** The indexes of the jobs collection: creating the declared ones, listing, dropping, and migrating legacy keys. */
@Injectable()
export class JobIndexStore {
  private readonly collection: mongo.Collection<JobDocument>;

  constructor(@Inject(JOBS_MODEL) private readonly model: Model<JobDocument>) {
    this.collection = jobsCollection(model);
  }

  /**
   * Creates every index the schema declares, each on its own; resolves the failed ones by index name. A transient
   * failure (see `classifyWriteError`) rejects at once instead: it says nothing about the index, and the caller starts
   * the setup again.
   */
  async createDeclaredIndexes(): Promise<Map<string, unknown>> {
    const failed = new Map<string, unknown>();
    for (const [key, options] of this.model.schema.indexes()) {
      try {
        await this.collection.createIndex(key as mongo.IndexSpecification, options as mongo.CreateIndexesOptions);
      } catch (error) {
        if (classifyWriteError(error) === 'transient') throw error;
        failed.set(String(options.name), error);
      }
    }
    return failed;
  }

  /** The collection's indexes; none when the collection does not exist yet. */
  async listIndexes(): Promise<IndexInfo[]> {
    try {
      return (await this.collection.listIndexes().toArray()) as IndexInfo[];
    } catch (error) {
      if (codeOf(error) === NAMESPACE_NOT_FOUND) return [];
      throw error;
    }
  }

  /**
   * Gives pending/running rows that an older version enqueued with a dedupeKey (and no scope) their scope, so their
   * keys keep deduplicating. Resolves how many rows got one, and how many could not because another live job of the
   * same name holds the key already (possible only for rows that older processes enqueued after the old index went).
   */
  async scopeLegacyKeys(): Promise<{ scoped: number; clashes: number }> {
    const rows = this.collection.find(
      { status: { $in: LIVE }, dedupeKey: { $exists: true }, dedupeScope: { $exists: false } },
      { projection: { name: 1, dedupeKey: 1 } },
    );
    const totals = { scoped: 0, clashes: 0 };
    let batch: mongo.AnyBulkWriteOperation<JobDocument>[] = [];
    const flush = async () => {
      if (batch.length === 0) return;
      const ops = batch;
      batch = [];
      try {
        totals.scoped += (await this.collection.bulkWrite(ops, { ordered: false })).modifiedCount;
      } catch (error) {
        const duplicates = duplicateKeyErrorsOnly(error);
        if (!duplicates) throw error;
        totals.scoped += duplicates.bulk.result.modifiedCount;
        totals.clashes += duplicates.writeErrors.length;
      }
    };
    for await (const row of rows) {
      const scope = dedupeScope(row.name, row.dedupeKey as string);
      batch.push({
        updateOne: {
          filter: { _id: row._id, status: { $in: LIVE }, dedupeScope: { $exists: false } },
          update: { $set: { dedupeScope: scope } },
        },
      });
      if (batch.length >= 1000) await flush();
    }
    await flush();
    return totals;
  }

  /** Resolves false when the index was gone already (another process dropped it first). */
  async dropIndex(name: string): Promise<boolean> {
    try {
      await this.collection.dropIndex(name);
      return true;
    } catch (error) {
      if (codeOf(error) === INDEX_NOT_FOUND) return false;
      throw error;
    }
  }
}
