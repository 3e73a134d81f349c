import type { Types } from 'mongoose';
import type { LogBatch } from '../model/job-log.js';
import type { JobProgress } from '../model/job-record.js';
import type { LeaseOwner, LeaseRenewal, LeaseRenewalStore } from '../persistence/job-lease.store.js';

/** Most renewals one command carries; more in one flush are sent as several commands at once. */
export const MAX_RENEWALS_PER_COMMAND = 1000;

interface QueuedRenewal extends LeaseRenewal {
  resolve: (lockedUntil: Date | null) => void;
  reject: (error: unknown) => void;
}

/**
 * Sends the lease renewals requested in one macrotask as one round trip, each still owner-fenced and answered as
 * `JobLeaseStore.renewLease` answers it: the row's deadline, `null` when the lease is lost (another owner, or the
 * run ended), or the database error.
 *
 * The flush runs in a `setImmediate`, not a microtask: Node drains microtasks after every timer callback, so a
 * microtask flush would send one command per lease whose heartbeat timer fired, while the check phase comes after
 * the whole timers (and I/O) phase and so gathers every renewal requested in that loop iteration. It costs at most one
 * loop iteration of latency, nothing next to a heartbeat interval. `setImmediate` is looked up at call time, so jest's
 * fake timers (which fake it) decide when a batch is sent.
 *
 * One call → `renewLease` (one `findAndModify`, the row's exact deadline). Several → one unordered `bulkWrite`; when
 * fewer rows matched than were sent, one read decides which leases were lost. A call never shares a command with
 * another call for the same job: it goes in the next flush.
 */
export class RenewalBatcher {
  private queue: QueuedRenewal[] = [];
  private flushScheduled = false;

  constructor(
    private readonly store: LeaseRenewalStore,
    private readonly clock: () => Date,
  ) {}

  /**
   * Renews one lease to at least `requestedUntil` (and sets its job's `progress` and `leaseMs`, when given, in the
   * same fenced update), in the next flush. Same answers as `renewLease`.
   */
  renew(
    jobId: Types.ObjectId,
    lockId: string,
    requestedUntil: Date,
    progress?: JobProgress,
    leaseMs?: number,
    logs?: LogBatch,
  ): Promise<Date | null> {
    return new Promise((resolve, reject) => {
      this.queue.push({ id: jobId, lockId, requestedUntil, progress, leaseMs, logs, resolve, reject });
      this.scheduleFlush();
    });
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.flushScheduled = false;
    const queued = this.queue;
    this.queue = [];
    // One clock reading for the whole flush: the writer's clock when the commands are sent.
    const now = this.clock();
    const { commands, later } = splitIntoCommands(queued);
    for (const command of commands) void this.send(command, now);
    if (later.length > 0) {
      this.queue.push(...later);
      this.scheduleFlush();
    }
  }

  /** Settles every call of the command, whatever happens (a settled promise ignores a second settlement). */
  private async send(command: QueuedRenewal[], now: Date): Promise<void> {
    try {
      if (command.length === 1) {
        const [call] = command;
        const { id, lockId, requestedUntil, progress, leaseMs, logs } = call;
        call.resolve(await this.store.renewLease(id, lockId, requestedUntil, now, progress, leaseMs, logs));
        return;
      }
      await this.sendBatch(command, now);
    } catch (error) {
      // The same error object for every call: one command failed, not n.
      for (const call of command) call.reject(error);
    }
  }

  private async sendBatch(command: QueuedRenewal[], now: Date): Promise<void> {
    const { matched, refused } = await this.store.renewLeases(command, now);
    if (matched === command.length && refused.size === 0) {
      // Every row matched, so each now has `lockedUntil >= requestedUntil` ($max). Resolving that lower bound rather
      // than the row's exact deadline is safe: the Lease only moves its local deadline forward to max(local, returned),
      // and a deadline lower than the row's only makes the watchdog end the lease earlier, never later.
      for (const call of command) call.resolve(call.requestedUntil);
      return;
    }
    for (const [index, error] of refused) command[index].reject(error);
    const undecided = command.filter((_, index) => !refused.has(index));
    if (undecided.length === 0) return;
    // The count says how many were lost, not which: one read finds them.
    const owners = await this.store.readLeaseOwners(undecided.map((call) => call.id));
    const byId = new Map(owners.map((owner) => [owner._id.toHexString(), owner]));
    for (const call of undecided) call.resolve(renewedDeadline(byId.get(call.id.toHexString()), call, now));
  }
}

/**
 * Commands of at most {@link MAX_RENEWALS_PER_COMMAND} calls, none with two calls for the same job (a Lease never
 * makes them, but the follow-up read could not tell which of the two matched); such a second call waits for `later`.
 */
function splitIntoCommands(queued: QueuedRenewal[]): { commands: QueuedRenewal[][]; later: QueuedRenewal[] } {
  const commands: QueuedRenewal[][] = [];
  const later: QueuedRenewal[] = [];
  let command: QueuedRenewal[] = [];
  let jobs = new Set<string>();
  for (const call of queued) {
    const job = call.id.toHexString();
    if (jobs.has(job)) {
      later.push(call);
      continue;
    }
    if (command.length === MAX_RENEWALS_PER_COMMAND) {
      commands.push(command);
      command = [];
      jobs = new Set();
    }
    command.push(call);
    jobs.add(job);
  }
  if (command.length > 0) commands.push(command);
  return { commands, later };
}

/**
 * The row's deadline if this call's write is visible on it: still this lock's, running, leased past the writer's
 * clock and at least as far as requested. Anything else (another owner, run out, finished, gone) is a lost lease.
 */
function renewedDeadline(row: LeaseOwner | undefined, call: LeaseRenewal, now: Date): Date | null {
  if (!row || row.lockedBy !== call.lockId || row.status !== 'running') return null;
  const until = row.lockedUntil;
  if (!(until instanceof Date)) return null;
  return until >= call.requestedUntil && until > now ? until : null;
}
