import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { type Observable, Subject } from 'rxjs';
import { now } from '../clock.js';
import type { JobProgress } from '../job-record.js';
import { JOBS_LOGGER_CONTEXT } from '../jobs.constants.js';
import { IsolatedObservable } from './isolated-observable.js';
import type { JobEvent, JobEventType } from './job-event.js';

/** The job an event is about. */
export type JobEventSubject = Pick<JobEvent, 'jobId' | 'name' | 'attempt'>;

/** The process-local event stream behind `JobsService.events$`. */
@Injectable()
export class JobEvents implements OnApplicationShutdown {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);
  private readonly subject = new Subject<JobEvent>();
  /** Subscriber errors are logged, never thrown back into the engine or the process. */
  readonly events$: Observable<JobEvent> = new IsolatedObservable<JobEvent>(
    (subscriber) => this.subject.subscribe(subscriber),
    (error) => this.logger.error(`An events$ subscriber threw: ${describe(error)}`),
  );

  /**
   * Per job with a hold open, its events in the order they are to go out: events, and holds that keep back what
   * comes after them until released. Tracked whether or not anyone subscribes yet: a subscriber may arrive before a
   * hold is released (an entry per job in flight costs nothing next to the write it waits for).
   */
  private readonly sequences = new Map<string, SequenceEntry[]>();
  /** Enqueue holds still open: their jobs may not be readable yet (`enqueuesInFlight`). */
  private openEnqueueHolds = 0;

  /**
   * Runs `enqueue` (which emits `enqueued` for the jobs it stored) while holding back the other events of `jobIds`,
   * then emits those: `enqueued` comes first (a worker here can claim a job before its insert is acknowledged).
   */
  async holdWhileEnqueueing<T>(jobIds: readonly string[], enqueue: () => Promise<T>): Promise<T> {
    const release = this.hold(jobIds);
    try {
      return await enqueue();
    } finally {
      release();
    }
  }

  /**
   * Holds back the events of `jobIds` (but `enqueued`) until the returned function is called, which emits them; for an
   * enqueue whose announcement waits for its transaction's commit. Calling it again does nothing.
   */
  hold(jobIds: readonly string[]): () => void {
    const holds = jobIds.map((id) => this.openHold(id, () => false));
    this.openEnqueueHolds += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.openEnqueueHolds -= 1;
      for (const [index, id] of jobIds.entries()) this.close(id, holds[index]);
    };
  }

  /**
   * Reserves the place of the event that ends `attempt` (`completed`, `retrying`, `dead`), from before its outcome
   * write is sent until that write's answer is handled: whatever happens to the job meanwhile in this process (the
   * next attempt claimed on another pooled connection as soon as the write landed, a cancel) is emitted after it.
   * Only the attempt's own `renewed`, `progress` and `stale` (its lease, still renewed while the write is under way)
   * go out before it. Release the slot in every case, with or without an event.
   */
  reserveOutcome(attempt: JobEventSubject): OutcomeSlot {
    const hold = this.openHold(
      attempt.jobId,
      (event) => event.attempt === attempt.attempt && OWN_ATTEMPT_EVENTS.has(event.type),
    );
    let released = false;
    return {
      emit: (type, error) => {
        if (!released) hold.events.push(this.build(type, attempt, error));
      },
      release: () => {
        if (released) return;
        released = true;
        this.close(attempt.jobId, hold);
      },
    };
  }

  /**
   * Whether an enqueue of this process is awaiting its acknowledgement, or its transaction's commit: its job may not
   * be readable yet (`drain` must not call the queue empty meanwhile, e.g. for a follow-up a handler enqueued without
   * awaiting it). A transaction left open (never committed, aborted or ended) therefore keeps drains here waiting.
   */
  get enqueuesInFlight(): boolean {
    return this.openEnqueueHolds > 0;
  }

  emit(type: JobEventType, job: JobEventSubject, error?: string, progress?: JobProgress): void {
    // `enqueued` is what enqueue holds wait for: it is never held.
    const sequence = type === 'enqueued' ? undefined : this.sequences.get(job.jobId);
    // Nobody listens and nothing is to be held for a later subscriber: build nothing (this runs several times a job).
    if (!sequence && !this.subject.observed) return;
    const event = this.build(type, job, error, progress);
    if (!sequence) {
      this.next(event);
      return;
    }
    // In front of the open holds at the end that let it pass (its own attempt's lease events), behind anything else.
    let at = sequence.length;
    while (at > 0) {
      const entry = sequence[at - 1];
      if (!(entry instanceof Hold && entry.open && entry.letsPass(event))) break;
      at -= 1;
    }
    sequence.splice(at, 0, event);
    this.flush(job.jobId);
  }

  onApplicationShutdown(): void {
    this.subject.complete();
  }

  private build(type: JobEventType, job: JobEventSubject, error?: string, progress?: JobProgress): JobEvent {
    const event: JobEvent = { type, jobId: job.jobId, name: job.name, attempt: job.attempt, at: now() };
    if (error !== undefined) event.error = error;
    if (progress !== undefined) event.progress = progress;
    return event;
  }

  private openHold(jobId: string, letsPass: (event: JobEvent) => boolean): Hold {
    const hold = new Hold(letsPass);
    const sequence = this.sequences.get(jobId);
    if (sequence) sequence.push(hold);
    else this.sequences.set(jobId, [hold]);
    return hold;
  }

  private close(jobId: string, hold: Hold): void {
    hold.open = false;
    this.flush(jobId);
  }

  /** Emits a job's events from the front of its sequence up to the first hold still open. */
  private flush(jobId: string): void {
    const sequence = this.sequences.get(jobId);
    if (!sequence) return;
    while (sequence.length > 0) {
      const entry = sequence[0];
      if (entry instanceof Hold && entry.open) return;
      sequence.shift();
      if (entry instanceof Hold) for (const event of entry.events) this.next(event);
      else this.next(entry);
    }
    this.sequences.delete(jobId);
  }

  private next(event: JobEvent): void {
    try {
      this.subject.next(event);
    } catch (error) {
      // Only with RxJS's deprecated synchronous error handling can a subscriber's error surface here.
      this.logger.error(`An events$ subscriber threw: ${describe(error)}`);
    }
  }
}

/** The place of an attempt's ending event, reserved by `JobEvents.reserveOutcome`. */
export interface OutcomeSlot {
  /** Puts the attempt's ending event in its place (it goes out on `release`). Ignored once released. */
  emit(type: JobEventType, error?: string): void;
  /** Emits the event put in place, if any, and what waited behind it. Calling it again does nothing. */
  release(): void;
}

/** What an attempt's lease emits while its outcome write is under way: these belong before the outcome. */
const OWN_ATTEMPT_EVENTS: ReadonlySet<JobEventType> = new Set(['renewed', 'progress', 'stale']);

/** A place in a job's event sequence: what it is given goes out there, and nothing behind it goes out before it. */
class Hold {
  open = true;
  readonly events: JobEvent[] = [];
  constructor(readonly letsPass: (event: JobEvent) => boolean) {}
}

type SequenceEntry = JobEvent | Hold;

function describe(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}
