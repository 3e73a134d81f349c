import { firstAnswer } from '../model/first-answer.js';
import type { ShutdownDeadline } from '../model/shutdown-deadline.js';
import { isPermanentWriteError } from '../persistence/database-errors.js';
import { IN_DOUBT } from './claims-in-doubt.js';

/** Refusals for the document after which the write is given up (the row is left to its lease). */
const REFUSALS_FOR_GOOD = 3;

/**
 * Sends an owner-fenced write that ends a claim nobody will run (a hand-back to `pending`, a dead-letter) until one
 * copy answers: hedged and retried like a claim in doubt (`IN_DOUBT`), by `until` (epoch ms, fixed by the caller) or
 * shutdown's hard bound, whichever comes first. A copy that matched nothing asks `landed()`, since an earlier copy may
 * have landed with its answer lost; the third refusal for the document itself (`isPermanentWriteError`) ends it, as
 * sending it again cannot help (one may be a passing fault: the long checker's seed 484). Resolves true (written), false (the row is no longer under this lock), or undefined
 * (no answer in time, or refused for good: the row is left to its lease). Never rejects.
 */
export async function sendOwnedWrite(
  write: () => Promise<boolean>,
  landed: () => Promise<boolean>,
  until: number,
  deadline: ShutdownDeadline,
): Promise<boolean | undefined> {
  let refusals = 0;
  const copy = async (): Promise<boolean | undefined> => {
    try {
      return (await write()) || (await landed());
    } catch (error) {
      // Refused for the document: said again, it is the row; said once, it may have been a passing fault.
      if (isPermanentWriteError(error) && ++refusals >= REFUSALS_FOR_GOOD) return undefined;
      throw error;
    }
  };
  const giveUpAt = () => Math.min(until, deadline.endsAt ?? Number.POSITIVE_INFINITY);
  return (await firstAnswer(copy, giveUpAt, IN_DOUBT))?.value;
}
