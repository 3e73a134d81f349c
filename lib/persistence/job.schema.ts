import { Schema } from 'mongoose';
import type { GuaranteeIndex } from '../model/errors/guarantee-index.js';
import type { JobDocument } from '../model/job-document.js';
import { describeJobId } from '../model/job-id.js';
import type { JobLogLine } from '../model/job-log.js';
import { JOB_STATUSES, type JobRecord } from '../model/job-record.js';
import { decodePayload } from '../model/payload-codec.js';
import {
  CONCURRENCY_SLOT_INDEX,
  DEBOUNCE_SCOPE_INDEX,
  DEDUPE_SCOPE_INDEX,
  GROUP_SLOT_INDEX,
  SCHEDULE_INDEX,
  THROTTLE_SCOPE_INDEX,
} from './guarantee-indexes.js';

/** Schema for documentation and index management; hot-path queries use the native collection. */
export function createJobSchema(collectionName: string): Schema<JobDocument> {
  const schema = new Schema<JobDocument>(
    {
      name: { type: String, required: true },
      payload: { type: Schema.Types.Mixed },
      status: { type: String, enum: JOB_STATUSES, required: true },
      runAt: { type: Date, required: true },
      priority: { type: Number, default: 0 },
      attemptCount: { type: Number, default: 0 },
      maxAttempts: { type: Number, required: true },
      attempts: [{ _id: false, at: Date, error: String, errorClass: String, stack: String }],
      lastError: String,
      lockedBy: String,
      lockedUntil: Date,
      leaseMs: Number,
      finishedBy: String,
      fencingToken: { type: Number, default: 0 },
      dedupeKey: String,
      dedupeScope: String,
      scheduleKey: String,
      throttleScope: String,
      debounceScope: String,
      debounceUntil: Date,
      expiresAt: Date,
      group: String,
      concurrencySlot: String,
      groupSlot: String,
      createdAt: Date,
      updatedAt: Date,
      startedAt: Date,
      finishedAt: Date,
      result: { type: Schema.Types.Mixed },
      progress: { type: Schema.Types.Mixed },
      logs: { type: Schema.Types.Mixed },
      logCount: Number,
      traceContext: { type: Schema.Types.Mixed },
    },
    { collection: collectionName, versionKey: false, minimize: false, autoIndex: false },
  );
  // Claim: due pending rows of the names a worker runs, in priority order. One index scan per name, merged in sort
  // order ("explode for sort"); a new name, because an index named 'claim' with other keys may already exist.
  schema.index({ status: 1, name: 1, priority: -1, runAt: 1, _id: 1 }, { name: 'claim_by_name' });
  // Next due: an idle worker's earliest pending runAt among its names (one scan per name, merged in runAt order).
  // `claim_by_name` puts priority before runAt, so it cannot serve this sort without reading every pending row.
  schema.index({ name: 1, runAt: 1 }, { name: 'next_due', partialFilterExpression: { status: 'pending' } });
  // Reclaim: running rows whose lease ran out.
  schema.index({ status: 1, lockedUntil: 1 }, { name: 'reclaim' });
  // One pending/running job per name and dedupe key: the scope is unset when the job leaves those states.
  uniqueSparse(schema, DEDUPE_SCOPE_INDEX);
  // One job per schedule tick, forever: the key is never unset.
  uniqueSparse(schema, SCHEDULE_INDEX);
  // One job per throttle key and window, forever (the scope is never unset); one pending job per debounce key (its
  // claim unsets the scope).
  uniqueSparse(schema, THROTTLE_SCOPE_INDEX);
  uniqueSparse(schema, DEBOUNCE_SCOPE_INDEX);
  // Fleet-wide limits: one row per slot, so at most `limit` rows of a name (or group) hold one.
  uniqueSparse(schema, CONCURRENCY_SLOT_INDEX);
  uniqueSparse(schema, GROUP_SLOT_INDEX);
  // Retention sweep: finished rows by expiry, oldest first. Sparse: only finished rows carry one.
  schema.index({ expiresAt: 1 }, { name: 'retention', sparse: true });
  // list: newest first among one status (several: one scan per status, merged) or one name; a search by dedupe key.
  // Other filters are checked on the rows these (or _id's own index, for no filter) walk.
  schema.index({ status: 1, _id: -1 }, { name: 'list_by_status' });
  schema.index({ name: 1, _id: -1 }, { name: 'list_by_name' });
  schema.index({ dedupeKey: 1 }, { name: 'list_by_dedupe_key', sparse: true });
  return schema;
}

function uniqueSparse(schema: Schema<JobDocument>, index: GuaranteeIndex): void {
  schema.index({ [index.field]: 1 }, { name: index.name, unique: true, sparse: true });
}

export function toJobRecord<TPayload = unknown>(
  doc: JobDocument,
  { payloadAsGiven = false }: { payloadAsGiven?: boolean } = {},
): JobRecord<TPayload> {
  return {
    // A row set aside for its foreign _id is listed too: its id as a string (JSON for other types).
    id: describeJobId(doc._id),
    name: doc.name,
    // A payload this process just inserted is the caller's validated object: it holds no stored Binary to decode.
    payload: (payloadAsGiven ? doc.payload : decodePayload(doc.payload)) as TPayload,
    status: doc.status,
    runAt: doc.runAt,
    priority: doc.priority ?? 0,
    attemptCount: doc.attemptCount ?? 0,
    maxAttempts: doc.maxAttempts,
    attempts: doc.attempts ?? [],
    lastError: doc.lastError ?? null,
    lockedBy: doc.lockedBy ?? null,
    lockedUntil: doc.lockedUntil ?? null,
    fencingToken: doc.fencingToken ?? 0,
    dedupeKey: doc.dedupeKey ?? null,
    group: doc.group ?? null,
    expiresAt: doc.expiresAt ?? null,
    createdAt: doc.createdAt,
    updatedAt: doc.updatedAt,
    startedAt: doc.startedAt ?? null,
    finishedAt: doc.finishedAt ?? null,
    result: doc.result === undefined ? null : decodePayload(doc.result),
    progress: doc.progress === undefined ? null : decodePayload(doc.progress),
    ...logsOf(doc),
  };
}

/** The row's log lines; a row written by hand may hold anything there: only well-formed lines, never a crash. */
function logsOf(doc: JobDocument): Pick<JobRecord, 'logs' | 'logsTruncated'> {
  const stored: unknown[] = Array.isArray(doc.logs) ? doc.logs : [];
  const logs = stored.filter(
    (line): line is JobLogLine =>
      line !== null &&
      typeof line === 'object' &&
      (line as JobLogLine).at instanceof Date &&
      typeof (line as JobLogLine).attempt === 'number' &&
      typeof (line as JobLogLine).message === 'string',
  );
  return {
    logs,
    logsTruncated: typeof doc.logCount === 'number' ? doc.logCount > logs.length : logs.length < stored.length,
  };
}
