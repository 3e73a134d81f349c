import type { Lease } from '../lease/lease';
import { classifyWriteError } from '../persistence/database-errors';
import { raceTimeout } from '../utils/race-timeout';

/** One owner-fenced outcome write: true when it matched the row this execution owns. */
export type OutcomeWrite = () => Promise<boolean>;

export type PersistResult =
  | { kind: 'written' }
  /** The fence did not match: the row was cancelled or taken over. */
  | { kind: 'not_owned' }
  /** Refused for its document (e.g. one over 16 MB, see `isPermanentWriteError`): sending it again cannot help. */
  | { kind: 'refused'; error: unknown }
  /**
   * The lease was lost, or the shutdown deadline passed, before a write's answer came. `late` is that write, when one
   * was under way: it may still land (it is fenced, so it lands only if the row was still ours), and resolves whether
   * it did (false on an error).
   */
  | { kind: 'gave_up'; why: string; late?: Promise<boolean> }
  /**
   * Errors of unknown kind (any server error not known to be transient or about the document, e.g. 11601) kept coming
   * for one lease: the lease is no longer renewed, as after a crash.
   */
  | { kind: 'abandoned'; error: unknown };

/** Waits after the n-th transient failure: 50 ms doubling, at most 1 s. */
const RETRY_BASE_MS = 50;
const RETRY_MAX_MS = 1_000;

const LOST = Symbol('lost');
const TIMED_OUT = Symbol('timed out');

/**
 * Sends `write` until it lands. Until then the execution still owns the row and its lease keeps being renewed, so a
 * database outage shorter than the lease does not turn a finished job into a reclaimed (re-run, charged) one. Stops
 * when the lease is lost (the row is then reclaimed like a crashed worker's) or when `deadline()` (epoch ms, set
 * during shutdown) passes; a write that hangs is abandoned at either point, not awaited. Only an error known to be
 * about the document written is final at once; errors that are neither known transient nor about the document (an
 * unfamiliar server code included) are retried for at most `unknownErrorBudgetMs`: a write that keeps failing for a
 * reason nobody recognises must not hold the row and its slot forever.
 */
export async function persistOutcome(
  write: OutcomeWrite,
  lease: Lease,
  unknownErrorBudgetMs: number,
  deadline: () => number | undefined = () => undefined,
): Promise<PersistResult> {
  const lost = lease.lost.then((): typeof LOST => LOST);
  let firstUnknownAt: number | undefined;
  for (let failures = 0; ; failures += 1) {
    if (lease.isStale) return { kind: 'gave_up', why: 'the lease was lost' };
    let answer: boolean | typeof LOST | typeof TIMED_OUT;
    let sent: Promise<boolean> | undefined;
    try {
      sent = write();
      answer = await raceDeadline(Promise.race([sent, lost]), deadline());
    } catch (error) {
      const kind = classifyWriteError(error);
      if (kind === 'permanent') return { kind: 'refused', error };
      if (kind === 'unknown') {
        firstUnknownAt ??= Date.now();
        if (Date.now() - firstUnknownAt >= unknownErrorBudgetMs) return { kind: 'abandoned', error };
      }
      sent = undefined; // it failed: nothing is under way
      const waitMs = Math.min(RETRY_BASE_MS * 2 ** failures, RETRY_MAX_MS);
      answer = await raceDeadline(Promise.race([sleep(waitMs).then((): true => true), lost]), deadline());
      if (answer === true) continue;
    }
    const late = sent?.catch(() => false);
    if (answer === LOST) return { kind: 'gave_up', why: 'the lease was lost', late };
    if (answer === TIMED_OUT) return { kind: 'gave_up', why: 'shutdown deadline passed', late };
    return answer ? { kind: 'written' } : { kind: 'not_owned' };
  }
}

/** Races `work` against an absolute deadline (none: just `work`). A write left behind is fenced and harmless. */
function raceDeadline<T>(work: Promise<T>, deadline: number | undefined): Promise<T | typeof TIMED_OUT> {
  return deadline === undefined ? work : raceTimeout(work, deadline - Date.now(), () => TIMED_OUT);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
