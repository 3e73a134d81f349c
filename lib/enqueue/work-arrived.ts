import { Injectable } from '@nestjs/common';
import { type Observable, Subject } from 'rxjs';

/**
 * Signals that jobs were stored or revived in this process (by an enqueue, a retry, a promote): an idle poll loop
 * listening here polls at once when they are due now, or sets its timer for their `runAt`, instead of waiting out its
 * interval. The code that stores jobs signals; the worker listens, so storing a job never needs the worker.
 */
@Injectable()
export class WorkArrived {
  private readonly arrivals = new Subject<Date | undefined>();
  /** Emits synchronously on every `signal()`, the earliest `runAt` given (undefined: due now); it never completes. */
  readonly arrivals$: Observable<Date | undefined> = this.arrivals.asObservable();

  /** Jobs were stored or revived here, due at `earliestRunAt` at the soonest (omitted: due now). */
  signal(earliestRunAt?: Date): void {
    this.arrivals.next(earliestRunAt);
  }
}
