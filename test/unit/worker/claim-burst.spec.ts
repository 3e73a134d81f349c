import { describe, expect, it } from '@jest/globals';
import { MAX_CLAIMS_IN_FLIGHT } from '../../../lib/claim/claims-in-flight';
import { type BurstSteps, type ClaimStepResult, claimBurst } from '../../../lib/worker/claim-burst';

/** A burst over a scripted queue: each claim is answered when the test settles it, in the order it likes. */
function scriptedBurst(options: { slots: number; names?: () => readonly string[] }) {
  const pending: { resolve: (result: ClaimStepResult) => void }[] = [];
  let inFlight = 0;
  let idle = 0;
  const steps: BurstSteps = {
    hasRoom: () => inFlight < options.slots,
    nextNames: () => ({ excluded: [], names: options.names?.() ?? ['a'] }),
    nothingToAsk: () => {
      idle += 1;
    },
    claim: () => {
      inFlight += 1;
      return new Promise<ClaimStepResult>((resolve) =>
        pending.push({
          resolve: (result) => {
            inFlight -= 1;
            resolve(result);
          },
        }),
      );
    },
  };
  return {
    done: claimBurst(steps),
    inFlight: () => pending.length,
    idle: () => idle,
    /** Answers the oldest claim in flight, then lets the burst send what it sends next. */
    async answer(result: ClaimStepResult): Promise<void> {
      (pending.shift() as { resolve: (result: ClaimStepResult) => void }).resolve(result);
      for (let i = 0; i < 5; i += 1) await Promise.resolve();
    },
  };
}

describe('claimBurst', () => {
  it('opens with one claim and ends on the first one that finds nothing', async () => {
    const burst = scriptedBurst({ slots: 10 });
    expect(burst.inFlight()).toBe(1);
    await burst.answer('empty');
    await expect(burst.done).resolves.toEqual({ end: 'empty', everyClaimFailed: false });
  });

  it('allows one more claim in flight per job claimed, up to MAX_CLAIMS_IN_FLIGHT', async () => {
    const burst = scriptedBurst({ slots: 100 });
    const seen: number[] = [];
    for (let claimed = 0; claimed < 20; claimed += 1) {
      seen.push(burst.inFlight());
      await burst.answer('claimed');
    }
    expect(Math.max(...seen)).toBe(MAX_CLAIMS_IN_FLIGHT);
    expect(seen.slice(0, 3)).toEqual([1, 1, 2]);
    while (burst.inFlight() > 0) await burst.answer('empty');
    await expect(burst.done).resolves.toEqual({ end: 'empty', everyClaimFailed: false });
  });

  it('sends no more claims than there is room for', async () => {
    const burst = scriptedBurst({ slots: 2 });
    const seen: number[] = [];
    for (let claimed = 0; claimed < 6; claimed += 1) {
      seen.push(burst.inFlight());
      await burst.answer('claimed');
    }
    expect(Math.max(...seen)).toBe(2);
    while (burst.inFlight() > 0) await burst.answer('empty');
    await expect(burst.done).resolves.toEqual({ end: 'empty', everyClaimFailed: false });
  });

  it('ends full, sending nothing, when there is no room', async () => {
    const burst = scriptedBurst({ slots: 0 });
    expect(burst.inFlight()).toBe(0);
    await expect(burst.done).resolves.toEqual({ end: 'full', everyClaimFailed: false });
    expect(burst.idle()).toBe(0);
  });

  it('counts a burst whose every claim threw as failed, and one with an answered claim as not', async () => {
    const failing = scriptedBurst({ slots: 10 });
    await failing.answer('failed');
    await expect(failing.done).resolves.toEqual({ end: 'failed', everyClaimFailed: true });

    const mixed = scriptedBurst({ slots: 10 });
    await mixed.answer('claimed');
    await mixed.answer('claimed');
    expect(mixed.inFlight()).toBe(2);
    await mixed.answer('failed');
    await mixed.answer('claimed');
    await expect(mixed.done).resolves.toEqual({ end: 'failed', everyClaimFailed: false });
  });

  it('keeps claiming after an inconclusive answer', async () => {
    const burst = scriptedBurst({ slots: 10 });
    await burst.answer('inconclusive');
    expect(burst.inFlight()).toBe(1);
    await burst.answer('empty');
    await expect(burst.done).resolves.toEqual({ end: 'empty', everyClaimFailed: false });
  });

  it('asks nothing when every name is at its limit, and says so', async () => {
    const burst = scriptedBurst({ slots: 10, names: () => [] });
    expect(burst.inFlight()).toBe(0);
    await expect(burst.done).resolves.toEqual({ end: 'empty', everyClaimFailed: false });
    expect(burst.idle()).toBe(1);
  });
});
