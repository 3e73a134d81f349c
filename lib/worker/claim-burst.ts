import { MAX_CLAIMS_IN_FLIGHT } from '../claim/claims-in-flight.js';

/** How a burst of claims ended: slots or names ran out, a claim found nothing due, or a claim threw. */
export type BurstEnd = 'full' | 'empty' | 'failed';
/** `inconclusive`: nothing due among names narrowed by claims in flight, and one of those names has room again. */
export type ClaimStepResult = 'claimed' | 'empty' | 'inconclusive' | 'failed';

/** What a claim step answered, and (`claimed`) how many jobs it took. */
export interface ClaimStepAnswer {
  result: ClaimStepResult;
  jobs: number;
}

/** What a burst asks of the poll loop. */
export interface BurstSteps {
  /** Slots free besides those the claims in flight hold (0 when stopping): how many more jobs a claim may take. */
  room(): number;
  /** The names the next claim may ask for (none when each is at its limit), and the names it leaves out. */
  nextNames(): { excluded: string[]; names: readonly string[] };
  /** Every name is at its limit and no claim is in flight: the poll ends without asking anything. */
  nothingToAsk(): void;
  /**
   * Sends one claim step among `names` for up to `want` jobs (more than one: a batch claim) and takes (or hands back)
   * what it returns. Never rejects.
   */
  claim(excluded: string[], names: readonly string[], want: number): Promise<ClaimStepAnswer>;
  /**
   * Before a step in a backlog: lets slots that are about to free join it (see `FinishingSlots.gather`), so jobs
   * that ended together are claimed again together. Never rejects.
   */
  gather(): Promise<void>;
}

/**
 * Claims while work is due and slots are free. It opens with one single-job claim (an empty queue costs one claim per
 * poll, and a lone job is picked up as by a one-at-a-time loop), unless the last burst ended with every slot full
 * (`backlog`). Once a claim of the burst took a job there is a backlog: the next step asks for every free slot at
 * once (up to `maxBatch`, the `claimBatchSize` option: a batch claim), after `gather` let slots about to free join it,
 * and nothing else is sent while a batch is in flight; a step asking for one job allows one more in flight per job
 * claimed, up to `MAX_CLAIMS_IN_FLIGHT`. The first step that finds nothing or throws stops new ones; resolves once
 * every step in flight landed, with how the burst ended and whether every step of it threw (one failed poll, however
 * many it sent).
 */
export async function claimBurst(
  steps: BurstSteps,
  backlog: boolean,
  maxBatch: number,
): Promise<{ end: BurstEnd; everyClaimFailed: boolean }> {
  const inFlight = new Set<Promise<void>>();
  const burst: { claimed: number; succeeded: boolean; batching: boolean; end?: BurstEnd } = {
    claimed: 0,
    succeeded: false,
    batching: false,
  };
  const mayClaimMore = () =>
    !burst.batching && inFlight.size < Math.min(MAX_CLAIMS_IN_FLIGHT, Math.max(1, burst.claimed)) && steps.room() > 0;
  for (;;) {
    // Before a batch step (claimBatchSize 1 never batches): slots about to free may join it.
    if (maxBatch > 1 && burst.end === undefined && (backlog || burst.claimed > 0) && mayClaimMore())
      await steps.gather();
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
      const want = backlog || burst.claimed > 0 ? Math.min(steps.room(), maxBatch) : 1;
      burst.batching = want > 1;
      const step: Promise<void> = steps
        .claim(excluded, names, want)
        .then(({ result, jobs }) => {
          if (result !== 'failed') burst.succeeded = true;
          if (result === 'claimed') burst.claimed += jobs;
          else if (result !== 'inconclusive') burst.end ??= result;
        })
        .finally(() => {
          inFlight.delete(step);
          if (want > 1) burst.batching = false;
        });
      inFlight.add(step);
    }
    if (inFlight.size === 0) break;
    await Promise.race(inFlight);
  }
  return { end: burst.end ?? 'full', everyClaimFailed: burst.end === 'failed' && !burst.succeeded };
}
