import type { mongo } from 'mongoose';
import type { GuaranteeIndex } from '../model/errors/guarantee-index.js';
import { UniqueIndexRejectedJobError } from '../model/errors/unique-index-rejected-job.error.js';
import type { JobDocument } from '../model/job-document.js';
import type { NewJobDocument } from '../model/new-job-document.js';
import { clashedIndex, clashOn } from './duplicate-key.js';

/** Telling a duplicate key on a guarantee index (an outcome) from one on another unique index (the job is rejected). */

/** Whether `clash` is on `index`: as the error says, else whether a row carries the value that index keeps unique. */
export async function clashesOn(
  collection: mongo.Collection<JobDocument>,
  clash: unknown,
  index: GuaranteeIndex,
  carrier: mongo.Filter<JobDocument>,
  session?: mongo.ClientSession,
): Promise<boolean> {
  const verdict = clashOn(clash, index);
  if (verdict !== 'unknown') return verdict === 'yes';
  // A transaction a duplicate key aborted can read nothing more: its caller retries or rethrows it whole.
  if (session?.inTransaction()) throw clash;
  return (await collection.findOne(carrier, { session, projection: { _id: 1 } })) !== null;
}

/** A duplicate key on an index that is not the dedupe scope's: named, so it cannot pass for a dedupe. */
export function rejectedJob(
  collection: mongo.Collection<JobDocument>,
  clash: unknown,
  doc: Pick<NewJobDocument, 'name'>,
  cause: unknown,
): UniqueIndexRejectedJobError {
  const indexName = clashedIndex(clash).name ?? null;
  return new UniqueIndexRejectedJobError(collection.collectionName, indexName, doc.name, { cause });
}
