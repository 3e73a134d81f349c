import type { BackoffOptions } from './jobs.options.js';

/**
 * Delay before the next attempt after `failedAttempts` failures (1-based):
 * `min(baseMs · 2^(n−1), maxMs) × random[0.5, 1)` — "equal jitter", so retries of jobs that failed
 * together spread out but never come back sooner than half the nominal delay.
 */
export function backoffDelayMs(
  failedAttempts: number,
  backoff: BackoffOptions,
  random: () => number = Math.random,
): number {
  const exponent = Math.max(0, failedAttempts - 1);
  const nominal = Math.min(backoff.baseMs * 2 ** exponent, backoff.maxMs);
  return Math.round(nominal * (0.5 + random() / 2));
}
