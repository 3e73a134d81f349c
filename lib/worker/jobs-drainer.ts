import { Inject, Injectable } from '@nestjs/common';
import { filter } from 'rxjs';
import { JobClaimService } from '../claim/job-claim.service.js';
import { PausedNames } from '../claim/paused-names.js';
import { type DrainLeftover, DrainTimeoutError } from '../model/errors/drain-timeout.error.js';
import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import type { JobEventType } from '../model/events/job-event.js';
import { JobEvents } from '../model/events/job-events.js';
import { describeJobId } from '../model/job-id.js';
import { JOBS_RESOLVED_OPTIONS } from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { raceTimeout } from '../model/race-timeout.js';
import { JobReadStore } from '../persistence/job-read.store.js';
import { type DrainOptions, resolveDrainOptions } from './drain-options.js';
import { Wakeup } from './wakeup.js';

/** Local events after which a watched name may have nothing left: each wakes the drain for one read. */
const SETTLING_EVENTS: ReadonlySet<JobEventType> = new Set(['completed', 'dead', 'failed', 'cancelled']);
/** Longest pause between two reads: the work of other processes is seen this late at most. */
const MAX_DRAIN_POLL_MS = 250;
/**
 * Empty reads in a row that end a drain. One read is not a snapshot: a job that goes from `running` back to `pending`
 * (a retry) while the read walks the index (pending keys first) can be missed, and a second read started after the
 * first ended sees it where it landed.
 */
const CONFIRMING_READS = 2;

const TIMED_OUT: unique symbol = Symbol('timed out');

/**
 * Waits until no job of some names is left to run soon: none `running`, none `pending` with a `runAt` before the
 * drain's deadline. The collection is the truth, whoever runs the jobs: it is read at once, after every local event
 * that may have finished one, and otherwise every `min(pollIntervalMs, 250 ms)`.
 */
@Injectable()
export class JobsDrainer {
  constructor(
    private readonly reads: JobReadStore,
    private readonly events: JobEvents,
    private readonly claims: JobClaimService,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
    private readonly paused: PausedNames,
  ) {}

  /** See `JobsService.drain`. */
  async drain(options: DrainOptions): Promise<void> {
    const resolved = resolveDrainOptions(options);
    const names = resolved.names ?? this.namesRunHere();
    const { timeoutMs } = resolved;
    const deadline = Date.now() + timeoutMs;
    const before = new Date(deadline);
    const watched = new Set(names);
    const wakeup = new Wakeup();
    // Subscribed before the first read: an event between that read and the subscription is not missed.
    const subscription = this.events.events$
      .pipe(
        filter((event) => event.type === 'enqueued' || (watched.has(event.name) && SETTLING_EVENTS.has(event.type))),
      )
      .subscribe(() => wakeup.wake());
    const pollMs = Math.min(this.options.pollIntervalMs, MAX_DRAIN_POLL_MS);
    let left: DrainLeftover[] = [];
    let readError: unknown;
    let emptyReads = 0;
    try {
      for (;;) {
        const read = await raceTimeout(
          this.readLeft(names, before).then(
            (found) => {
              readError = undefined;
              return found;
            },
            (error: unknown) => {
              // A failed read is tried again at the next interval: an outage shorter than the wait is not an answer.
              readError = error;
              return undefined;
            },
          ),
          deadline - Date.now(),
          (): typeof TIMED_OUT => TIMED_OUT,
        );
        if (read !== undefined && read !== TIMED_OUT) {
          left = read;
          // An enqueue of this process still in flight may be a follow-up that is not readable yet.
          if (read.length === 0 && !this.events.enqueuesInFlight) {
            emptyReads += 1;
            if (emptyReads >= CONFIRMING_READS) return;
            continue;
          }
        }
        emptyReads = 0;
        const remaining = deadline - Date.now();
        if (read === TIMED_OUT || remaining <= 0) {
          const cause = readError === undefined ? undefined : { cause: readError };
          throw new DrainTimeoutError(await this.markPaused(left), timeoutMs, cause);
        }
        await wakeup.sleep(Math.min(pollMs, remaining));
      }
    } finally {
      subscription.unsubscribe();
    }
  }

  /**
   * The names this process's poll loop runs, including limited names its claims skip this poll (at their limit: their
   * jobs are still to run); none in an enqueue-only process, which must name what it waits for.
   */
  private namesRunHere(): string[] {
    const names = this.options.worker ? this.claims.runNames() : [];
    if (names.length === 0) {
      throw new InvalidOptionError(
        'names',
        undefined,
        'is required in a process that runs no jobs (worker: false, or no @JobHandler): name the jobs to wait for',
      );
    }
    return [...names];
  }

  /**
   * Marks the leftovers of paused names (read now; as last read here when that read fails): nothing claims them until
   * `resume`, which is likely why the drain waited in vain.
   */
  private async markPaused(left: DrainLeftover[]): Promise<DrainLeftover[]> {
    if (left.length === 0) return left;
    await this.paused.read().catch(() => undefined);
    return left.map((leftover) => (this.paused.has(leftover.name) ? { ...leftover, paused: true } : leftover));
  }

  private async readLeft(names: readonly string[], before: Date): Promise<DrainLeftover[]> {
    const groups = await this.reads.countUnfinished(names, before, new Date());
    return groups.map(({ _id, count, firstId, expiredLeases }) => ({
      name: _id.name,
      status: _id.status,
      count,
      jobId: describeJobId(firstId),
      ...(expiredLeases > 0 ? { expiredLeases } : {}),
    }));
  }
}
