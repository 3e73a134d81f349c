import { MAX_CLAIMS_IN_FLIGHT } from '../claim/claims-in-flight.js';

/** How a burst of claims ended: slots or names ran out, a claim found nothing due, or a claim threw. */
export type BurstEnd = 'full' | 'empty' | 'failed';
/** `inconclusive`: nothing due among names narrowed by claims in flight, and one of those names has room again. */
export type ClaimStepResult = 'claimed' | 'empty' | 'inconclusive' | 'failed';

/** What a burst asks of the poll loop. */
export interface BurstSteps {
  /** Whether the loop may send one more claim: not stopping, and a slot free besides those the claims in flight hold. */
  hasRoom(): boolean;
  /** The names the next claim may ask for (none when each is at its limit), and the names it leaves out. */
  nextNames(): { excluded: string[]; names: readonly string[] };
  /** Every name is at its limit and no claim is in flight: the poll ends without asking anything. */
  nothingToAsk(): void;
  /** Sends one claim among `names` and takes (or hands back) what it returns. Never rejects. */
  claim(excluded: string[], names: readonly string[]): Promise<ClaimStepResult>;
}

/**
 * Claims while work is due and slots are free, with up to `min(free slots, MAX_CLAIMS_IN_FLIGHT)` claims in flight.
 * It opens with one claim (an empty queue costs one claim per poll) and allows one more in flight per job claimed,
 * so a lone job costs what a one-at-a-time loop does and a large backlog doubles the claims in flight every round
 * trip. The first claim that finds nothing or throws stops new ones; resolves once every claim in flight landed, with
 * how the burst ended and whether every claim of it threw (one failed poll, however many claims it sent).
 */
export async function claimBurst(steps: BurstSteps): Promise<{ end: BurstEnd; everyClaimFailed: boolean }> {
  const inFlight = new Set<Promise<void>>();
  const burst: { claimed: number; succeeded: boolean; end?: BurstEnd } = { claimed: 0, succeeded: false };
  const mayClaimMore = () =>
    inFlight.size < Math.min(MAX_CLAIMS_IN_FLIGHT, Math.max(1, burst.claimed)) && steps.hasRoom();
  for (;;) {
    while (burst.end === undefined && mayClaimMore()) {
      const { excluded, names } = steps.nextNames();
      if (names.length === 0) {
        // Every name is at its limit (counting claims in flight): nothing to ask for until one frees up.
        if (inFlight.size === 0) {
          steps.nothingToAsk();
          burst.end = 'empty';
        }
        break;
      }
      const step: Promise<void> = steps
        .claim(excluded, names)
        .then((result) => {
          if (result !== 'failed') burst.succeeded = true;
          if (result === 'claimed') burst.claimed += 1;
          else if (result !== 'inconclusive') burst.end ??= result;
        })
        .finally(() => inFlight.delete(step));
      inFlight.add(step);
    }
    if (inFlight.size === 0) break;
    await Promise.race(inFlight);
  }
  return { end: burst.end ?? 'full', everyClaimFailed: burst.end === 'failed' && !burst.succeeded };
}
