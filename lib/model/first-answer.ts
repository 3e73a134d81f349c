/** How an idempotent request is repeated until one copy answers (see `firstAnswer`). */
export interface HedgeSchedule {
  /** No answer this long after the last copy was sent: send another beside it (then twice as long, and so on). */
  hedgeMs: number;
  /** Copies waiting for an answer at once, at most (a hung connection holds its copy until the socket dies). */
  maxInFlight: number;
  /** After a copy fails: wait `baseMs` doubling up to `maxMs` before the next. */
  retry: { baseMs: number; maxMs: number };
}

/**
 * Sends an idempotent `request` until one copy answers, before `giveUpAt()` (epoch ms, read at each step). A copy
 * that fails is followed by another after a backoff; a copy that neither answers nor fails (its connection hung, for
 * instance behind a network partition that has since healed) gets another copy beside it after `hedgeMs`, so the
 * first answer on a working connection wins. Resolves `{ value }` of the first answer, or `undefined` at `giveUpAt`
 * (copies still in flight are left to finish or fail unobserved).
 */
export async function firstAnswer<T>(
  request: () => Promise<T>,
  giveUpAt: () => number,
  schedule: HedgeSchedule,
): Promise<{ value: T } | undefined> {
  type Answer = { value: T } | { failed: Promise<Answer> };
  const inFlight = new Set<Promise<Answer>>();
  const send = () => {
    const copy: Promise<Answer> = request().then(
      (value) => ({ value }),
      () => ({ failed: copy }),
    );
    inFlight.add(copy);
  };
  let failures = 0;
  let hedgeMs = schedule.hedgeMs;
  send();
  for (;;) {
    const leftMs = giveUpAt() - Date.now();
    if (leftMs <= 0) return undefined;
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<'hedge' | 'deadline'>((resolve) => {
      timer =
        hedgeMs < leftMs ? setTimeout(() => resolve('hedge'), hedgeMs) : setTimeout(() => resolve('deadline'), leftMs);
    });
    const answer = await Promise.race([...inFlight, waited]).finally(() => clearTimeout(timer));
    if (answer === 'deadline') return undefined;
    if (answer === 'hedge') {
      if (inFlight.size < schedule.maxInFlight) send();
      hedgeMs *= 2;
    } else if ('value' in answer) {
      return answer;
    } else {
      inFlight.delete(answer.failed);
      const waitMs = Math.min(schedule.retry.baseMs * 2 ** failures, schedule.retry.maxMs);
      failures += 1;
      if (Date.now() + waitMs >= giveUpAt()) return undefined;
      await new Promise((resolve) => setTimeout(resolve, waitMs));
      send();
    }
  }
}
