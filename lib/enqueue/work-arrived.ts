import { Injectable } from '@nestjs/common';
import { type Observable, Subject } from 'rxjs';

/**
 * Signals that jobs became due in this process (stored by an enqueue, or revived by a retry): an idle poll loop
 * listening here polls at once instead of waiting out its interval. The code that stores jobs signals; the worker
 * listens, so storing a job never needs the worker.
 */
@Injectable()
export class WorkArrived {
  private readonly arrivals = new Subject<void>();
  /** Emits synchronously on every `signal()`; it never completes. */
  readonly arrivals$: Observable<void> = this.arrivals.asObservable();

  /** Jobs were stored or revived here and are due now. */
  signal(): void {
    this.arrivals.next();
  }
}
