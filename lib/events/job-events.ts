import { Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { type Observable, Subject } from 'rxjs';
import { now } from '../utils/clock';
import type { JobEvent, JobEventType } from './job-event';

/** The process-local event stream behind `JobsService.events$`. */
@Injectable()
export class JobEvents implements OnApplicationShutdown {
  private readonly subject = new Subject<JobEvent>();
  readonly events$: Observable<JobEvent> = this.subject.asObservable();

  emit(type: JobEventType, job: { jobId: string; name: string; attempt: number }, error?: string): void {
    const event: JobEvent = { type, jobId: job.jobId, name: job.name, attempt: job.attempt, at: now() };
    if (error !== undefined) event.error = error;
    this.subject.next(event);
  }

  onApplicationShutdown(): void {
    this.subject.complete();
  }
}
