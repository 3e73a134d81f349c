import { mongo } from 'mongoose';
import { UnstorableResultError } from './errors/unstorable-result.error.js';
import { MAX_LOG_BYTES } from './job-log.js';
import { MAX_DOCUMENT_BYTES, MAX_PAYLOAD_BYTES, MAX_PROGRESS_BYTES } from './jobs.constants.js';
import { assertStorableValue } from './payload-validator.js';

/** Room for the completion write's own fields (status, dates) on top of the row as claimed and its progress. */
const COMPLETION_FIELDS_BYTES = 1024;

/**
 * Throws {@link UnstorableResultError} unless `result` follows the payload rules (including their size limit) and
 * the job's row as claimed (`storedRow`), with the result, its latest progress, a full log and the completion fields, stays
 * under MongoDB's 16 MB document limit. `undefined` is no result and always passes. The row is measured only when
 * there is a result to store.
 */
export function assertStorableResult(jobId: string, result: unknown, storedRow: object): void {
  if (result === undefined) return;
  assertStorableValue(result, (path, problem) => new UnstorableResultError(jobId, path, problem));
  const resultBytes = mongo.BSON.calculateObjectSize({ result }, { ignoreUndefined: true });
  if (resultBytes > MAX_PAYLOAD_BYTES) {
    throw new UnstorableResultError(
      jobId,
      '',
      `is ${resultBytes} bytes as BSON, over the limit of ${MAX_PAYLOAD_BYTES}`,
    );
  }
  const rowBytes = mongo.BSON.calculateObjectSize(storedRow, { ignoreUndefined: true });
  if (rowBytes + resultBytes + MAX_PROGRESS_BYTES + MAX_LOG_BYTES + COMPLETION_FIELDS_BYTES > MAX_DOCUMENT_BYTES) {
    throw new UnstorableResultError(
      jobId,
      '',
      `is ${resultBytes} bytes as BSON: with the job's other fields (${rowBytes} bytes) the document would be over ` +
        `the 16 MB document limit`,
    );
  }
}
