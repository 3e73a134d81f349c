import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { type Observable, Subject } from 'rxjs';
import { JOBS_LOGGER_CONTEXT } from '../jobs.constants';
import type { JobProgress } from '../persistence/job.types';
import { now } from '../utils/clock';
import { IsolatedObservable } from './isolated-observable';
import type { JobEvent, JobEventType } from './job-event';

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
   * Jobs whose enqueue in this process awaits its acknowledgement, with the events their run here emitted meanwhile:
   * held back so that `enqueued` comes first (a worker here can claim a job before its insert is acknowledged).
   */
  private readonly enqueueing = new Map<string, JobEvent[]>();

  /**
   * Runs `enqueue` (which emits `enqueued` for the jobs it stored) while holding back the other events of `jobIds`,
   * then emits those. Tracked whether or not anyone subscribes yet: a subscriber may arrive before the acknowledgement
   * (a map entry per job in flight costs nothing next to the insert).
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
    for (const id of jobIds) this.enqueueing.set(id, []);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const id of jobIds) this.releaseHeld(id);
    };
  }

  /**
   * Whether an enqueue of this process is awaiting its acknowledgement, or its transaction's commit: its job may not
   * be readable yet (`drain` must not call the queue empty meanwhile, e.g. for a follow-up a handler enqueued without
   * awaiting it). A transaction left open (never committed, aborted or ended) therefore keeps drains here waiting.
   */
  get enqueuesInFlight(): boolean {
    return this.enqueueing.size > 0;
  }

  emit(type: JobEventType, job: JobEventSubject, error?: string, progress?: JobProgress): void {
    const held = type === 'enqueued' ? undefined : this.enqueueing.get(job.jobId);
    // Nobody listens and nothing is to be held for a later subscriber: build nothing (this runs several times a job).
    if (!held && !this.subject.observed) return;
    const event: JobEvent = { type, jobId: job.jobId, name: job.name, attempt: job.attempt, at: now() };
    if (error !== undefined) event.error = error;
    if (progress !== undefined) event.progress = progress;
    if (held) held.push(event);
    else this.next(event);
  }

  onApplicationShutdown(): void {
    this.subject.complete();
  }

  private releaseHeld(jobId: string): void {
    const held = this.enqueueing.get(jobId);
    this.enqueueing.delete(jobId);
    for (const event of held ?? []) this.next(event);
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

function describe(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}
