import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { type Observable, Subject } from 'rxjs';
import { JOBS_LOGGER_CONTEXT } from '../jobs.constants';
import { now } from '../utils/clock';
import { IsolatedObservable } from './isolated-observable';
import type { JobEvent, JobEventType } from './job-event';

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

  emit(type: JobEventType, job: { jobId: string; name: string; attempt: number }, error?: string): void {
    const event: JobEvent = { type, jobId: job.jobId, name: job.name, attempt: job.attempt, at: now() };
    if (error !== undefined) event.error = error;
    try {
      this.subject.next(event);
    } catch (error) {
      // Only with RxJS's deprecated synchronous error handling can a subscriber's error surface here.
      this.logger.error(`An events$ subscriber threw: ${describe(error)}`);
    }
  }

  onApplicationShutdown(): void {
    this.subject.complete();
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}
