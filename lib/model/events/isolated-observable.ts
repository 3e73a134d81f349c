import { Observable, type Observer, type Operator, Subscriber, type Subscription, type TeardownLogic } from 'rxjs';

/**
 * An Observable whose subscribers cannot hurt the producer: a subscriber callback that throws (or an operator
 * error nobody handles) is passed to `report` instead of reaching RxJS's unhandled-error hook, which rethrows on a
 * timer and would kill the process. Operators applied with `pipe` keep the isolation (`lift` returns this class).
 */
export class IsolatedObservable<T> extends Observable<T> {
  constructor(
    subscribe: ((this: Observable<T>, subscriber: Subscriber<T>) => TeardownLogic) | undefined,
    private readonly report: (error: unknown) => void,
  ) {
    super(subscribe);
  }

  override lift<R>(operator?: Operator<T, R>): Observable<R> {
    const lifted = new IsolatedObservable<R>(undefined, this.report);
    lifted.source = this;
    lifted.operator = operator;
    return lifted;
  }

  override subscribe(
    observerOrNext?: Partial<Observer<T>> | ((value: T) => void) | null,
    error?: ((error: unknown) => void) | null,
    complete?: (() => void) | null,
  ): Subscription {
    // RxJS's own subscribers (operator chains) pass straight through: only user callbacks are guarded.
    if (observerOrNext instanceof Subscriber) return super.subscribe(observerOrNext);
    const observer: Partial<Observer<T>> =
      typeof observerOrNext === 'function' || observerOrNext == null
        ? { next: observerOrNext ?? undefined, error: error ?? undefined, complete: complete ?? undefined }
        : observerOrNext;
    const guard = (callback: () => void): void => {
      try {
        callback();
      } catch (thrown) {
        this.report(thrown);
      }
    };
    return super.subscribe({
      next: (value) => guard(() => observer.next?.(value)),
      error: (thrown: unknown) => (observer.error ? guard(() => observer.error?.(thrown)) : this.report(thrown)),
      complete: () => guard(() => observer.complete?.()),
    });
  }
}
