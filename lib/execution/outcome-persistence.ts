import type { Lease } from '../lease/lease.js';
import { raceTimeout } from '../model/race-timeout.js';
import { classifyWriteError, mayHaveLanded } from '../persistence/database-errors.js';

/** One owner-fenced outcome write: true when it matched the row this execution owns. */
export type OutcomeWrite = () => Promise<boolean>;

/**
 * Whether this execution's own finishing write is on the row (it records the lock id that ended the run): asked when
 * a try whose answer was lost is followed by one that matched nothing, which is then the earlier try having landed.
 */
export type OutcomeLanded = () => Promise<boolean>;

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
  landed?: OutcomeLanded,
): Promise<PersistResult> {
  const lost = lease.lost.then((): typeof LOST => LOST);
  let firstUnknownAt: number | undefined;
  /** A try failed in a way that may have written it (its answer lost): a later miss may be that try's doing. */
  let inDoubt = false;
  for (let failures = 0; ; failures += 1) {
    if (lease.isStale) return { kind: 'gave_up', why: 'the lease was lost' };
    let answer: boolean | typeof LOST | typeof TIMED_OUT;
    let sent: Promise<boolean> | undefined;
    try {
      sent = write();
      answer = await raceDeadline(Promise.race([sent, lost]), deadline());
    } catch (error) {
      if (mayHaveLanded(error)) inDoubt = true;
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
    if (answer) return { kind: 'written' };
    if (!inDoubt || !landed) return { kind: 'not_owned' };
    const own = await readLanded(landed, deadline());
    if (own !== 'unknown') return own ? { kind: 'written' } : { kind: 'not_owned' };
    // Could not read it back: wait, then send the (fenced) write again, and ask again if it misses again.
    const waitMs = Math.min(RETRY_BASE_MS * 2 ** failures, RETRY_MAX_MS);
    const waited = await raceDeadline(Promise.race([sleep(waitMs).then((): true => true), lost]), deadline());
    if (waited === LOST) return { kind: 'gave_up', why: 'the lease was lost' };
    if (waited === TIMED_OUT) return { kind: 'gave_up', why: 'shutdown deadline passed' };
  }
}

/** `landed()`, or `unknown` when the read fails or the shutdown deadline passes first. */
async function readLanded(landed: OutcomeLanded, deadline: number | undefined): Promise<boolean | 'unknown'> {
  try {
    const answer = await raceDeadline(landed(), deadline);
    return answer === TIMED_OUT ? 'unknown' : answer;
  } catch {
    return 'unknown';
  }
}

/** Races `work` against an absolute deadline (none: just `work`). A write left behind is fenced and harmless. */
function raceDeadline<T>(work: Promise<T>, deadline: number | undefined): Promise<T | typeof TIMED_OUT> {
  return deadline === undefined ? work : raceTimeout(work, deadline - Date.now(), () => TIMED_OUT);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
