import type { mongo, Types } from 'mongoose';
import type { JobDocument } from '../model/job-document.js';
import { statementRefusal, WriteOutcomeUnknownError } from './database-errors.js';
import { owned, updateOwned } from './owner-fence.js';
import { MAX_STATEMENT_BYTES, type PlainCommands, statementBytes, type UpdateStatement } from './plain-commands.js';
import { USER_VALUE_OPTIONS } from './row-fields.js';

/** Most updates one command carries; more in one flush go out as several commands at once. */
export const MAX_UPDATES_PER_COMMAND = 1000;

interface QueuedUpdate {
  id: Types.ObjectId;
  lockId: string;
  update: mongo.UpdateFilter<JobDocument>;
  /** The fenced statement, built when the flush measures it. */
  statement?: UpdateStatement;
  resolve: (matched: boolean) => void;
  reject: (error: unknown) => void;
}

/**
 * Sends the owner-fenced updates that end runs (`JobOutcomeStore`), requested in one event-loop turn, as one round
 * trip: many handlers settling together (a backlog of short jobs) cost one command, not one each. Each update is
 * answered as a lone `updateOne` would answer it: whether it matched the row this lock owns, or the error.
 *
 * One update → one `updateOne`. Several → one unordered `update` command (`PlainCommands.sendUpdate`, kept under one
 * command's size here); an update the server refused for its document
 * rejects with that refusal, as a lone write would; when fewer rows matched than were sent, one read of the rows
 * tells which updates landed: every update that ends a run records its lock id in `finishedBy`, so a row finished by
 * this lock matched. An update for a job already queued goes in the next flush (that read could not tell the two
 * apart). The flush runs in a `setTimeout(0)`: it gathers what the rest of the loop iteration requests (the I/O phase,
 * where handlers settle), not just one callback's microtasks. Not a `setImmediate`: a completion sent from one while
 * the driver was clearing its pool after a dropped connection hung for good, about 2 runs in 5 of
 * `test/chaos/outage-writes.spec.ts` (the first test), never with a timer (10 of 10).
 */
export class OwnedUpdateBatcher {
  private queue: QueuedUpdate[] = [];
  private flushScheduled = false;

  constructor(
    private readonly collection: mongo.Collection<JobDocument>,
    private readonly commands: Pick<PlainCommands, 'sendUpdate'>,
  ) {}

  /** The update, fenced to the row `lockId` owns, in the next flush: whether it matched. */
  update(id: Types.ObjectId, lockId: string, update: mongo.UpdateFilter<JobDocument>): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.queue.push({ id, lockId, update, resolve, reject });
      if (this.flushScheduled) return;
      this.flushScheduled = true;
      setTimeout(() => this.flush(), 0);
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    const queued = this.queue;
    this.queue = [];
    const later: QueuedUpdate[] = [];
    let command: QueuedUpdate[] = [];
    let bytes = 0;
    const jobs = new Set<string>();
    for (const call of queued) {
      const job = rowKey(call.id);
      if (jobs.has(job)) {
        later.push(call);
        continue;
      }
      jobs.add(job);
      // Each command within one plain command's size, so that what one answered never waits on another's failure.
      call.statement = { q: owned(call.id, call.lockId), u: call.update };
      const size = statementBytes(call.statement, USER_VALUE_OPTIONS);
      if (command.length > 0 && (command.length === MAX_UPDATES_PER_COMMAND || bytes + size > MAX_STATEMENT_BYTES)) {
        void this.send(command);
        command = [];
        bytes = 0;
      }
      command.push(call);
      bytes += size;
    }
    if (command.length > 0) void this.send(command);
    for (const call of later) {
      // Through `update`, so that a third call for the same job waits for a third flush.
      this.update(call.id, call.lockId, call.update).then(call.resolve, call.reject);
    }
  }

  /** Settles every call of the command, whatever happens (a settled promise ignores a second settlement). */
  private async send(command: QueuedUpdate[]): Promise<void> {
    try {
      if (command.length === 1) {
        const [{ id, lockId, update, resolve }] = command;
        resolve(await updateOwned(this.collection, id, lockId, update, USER_VALUE_OPTIONS));
        return;
      }
      await this.sendBulk(command);
    } catch (error) {
      // The same error object for every call: one command failed, not n.
      for (const call of command) call.reject(error);
    }
  }

  private async sendBulk(command: QueuedUpdate[]): Promise<void> {
    const { matched, refused } = await this.commands.sendUpdate(
      command.map((call) => call.statement ?? { q: owned(call.id, call.lockId), u: call.update }),
      USER_VALUE_OPTIONS,
    );
    // A refusal not about its row may follow a write that landed (a mongos): rejected as maybe applied.
    for (const [index, error] of refused) command[index].reject(statementRefusal(error));
    const undecided = command.filter((_, index) => !refused.has(index));
    if (matched === undecided.length) {
      for (const call of undecided) call.resolve(true);
      return;
    }
    if (undecided.length === 0) return;
    // The count says how many matched, not which: the rows say which this lock finished (read from the primary,
    // which has the writes). A failed read leaves each answer unknown, which the caller reads as maybe landed.
    let rows: Pick<JobDocument, '_id' | 'finishedBy'>[];
    try {
      rows = await this.collection
        .find<Pick<JobDocument, '_id' | 'finishedBy'>>(
          { _id: { $in: undecided.map((call) => call.id) } },
          { projection: { finishedBy: 1 }, readPreference: 'primary' },
        )
        .toArray();
    } catch (error) {
      const unknown = new WriteOutcomeUnknownError(error);
      for (const call of undecided) call.reject(unknown);
      return;
    }
    const finishedBy = new Map(rows.map((row) => [rowKey(row._id), row.finishedBy]));
    for (const call of undecided) call.resolve(finishedBy.get(rowKey(call.id)) === call.lockId);
  }
}

/** A row's `_id` as a map key: an ObjectId as usual, but a row another tool wrote may have a string or number id. */
function rowKey(id: unknown): string {
  return `${typeof id}:${String(id)}`;
}
