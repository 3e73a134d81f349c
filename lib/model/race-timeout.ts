import { MAX_TIMER_MS } from './jobs.constants.js';

/**
 * Settles like `work`, or with what `onTimeout()` returns once `ms` pass first (a throw from it rejects). The work
 * itself is not cancelled; its late failure is dropped, as nobody waits for it any more. The one timer race every
 * deadline in the library goes through (index setup, health pings, settle waits, shutdown, outcome writes).
 */
export function raceTimeout<T, F>(work: Promise<T>, ms: number, onTimeout: () => F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = Symbol('timed out');
  const timeout = new Promise<typeof timedOut>((resolve) => {
    timer = setTimeout(() => resolve(timedOut), Math.min(Math.max(0, ms), MAX_TIMER_MS));
  });
  work.catch(() => undefined);
  return Promise.race([work, timeout])
    .finally(() => clearTimeout(timer))
    .then((value) => (value === timedOut ? onTimeout() : (value as T)));
}
