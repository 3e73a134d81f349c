import type { LeaseLostError } from './errors/lease-lost.error.js';

/** How an execution ended; decides what (if anything) the runner writes. */
export type ExecutionOutcome =
  /** The handler resolved; `result` is its value (`undefined`: no result). */
  | { kind: 'succeeded'; result: unknown }
  | { kind: 'failed'; error: unknown }
  | { kind: 'stale'; error: LeaseLostError }
  | { kind: 'cancelled' }
  | { kind: 'shutdown' }
  /** The handler was never called: the claim's own lease had ended before it could start. */
  | { kind: 'not_started'; reason: string }
  /** The handler ignored its abort past the settle wait and the lease then ran out: nothing is written. */
  | { kind: 'abandoned'; reason: Error };
