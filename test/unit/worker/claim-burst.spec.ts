import { describe, expect, it } from '@jest/globals';
import { DEFAULT_JOBS_OPTIONS } from '../../../lib/model/jobs.constants';
import {
  type BurstSteps,
  type ClaimStepAnswer,
  type ClaimStepResult,
  claimBurst,
} from '../../../lib/worker/claim-burst';

/** The default `claimBatchSize`. */
const MAX_BATCH = DEFAULT_JOBS_OPTIONS.claimBatchSize;

/**
 * A burst over a scripted queue: each step is answered when the test settles it, in the order it likes. A step holds
 * the slots it asks for while in flight; the jobs it takes keep theirs (they run until the test ends).
 */
function scriptedBurst(options: {
  /** Free slots besides what the burst's steps hold and took (a function: they change while it runs). */
  slots: number | (() => number);
  names?: () => readonly string[];
  backlog?: boolean;
  maxBatch?: number;
  /** What `gather` waits for (default: nothing). */
  gather?: () => Promise<void>;
}) {
  const pending: { want: number; resolve: (answer: ClaimStepAnswer) => void }[] = [];
  let held = 0;
  let running = 0;
  let idle = 0;
  let gathers = 0;
  const steps: BurstSteps = {
    room: () => (typeof options.slots === 'number' ? options.slots : options.slots()) - held - running,
    nextNames: () => ({ excluded: [], names: options.names?.() ?? ['a'] }),
    nothingToAsk: () => {
      idle += 1;
    },
    claim: (_excluded, _names, want) => {
      held += want;
      return new Promise<ClaimStepAnswer>((resolve) =>
        pending.push({
          want,
          resolve: (answer) => {
            held -= want;
            running += answer.jobs;
            resolve(answer);
          },
        }),
      );
    },
    gather: () => {
      gathers += 1;
      return options.gather?.() ?? Promise.resolve();
    },
  };
  return {
    done: claimBurst(steps, options.backlog ?? false, options.maxBatch ?? MAX_BATCH),
    inFlight: () => pending.length,
    /** What each step in flight asks for. */
    wants: () => pending.map((step) => step.want),
    idle: () => idle,
    gathers: () => gathers,
    /** Lets the burst go on as far as it can without an answer. */
    async settle(): Promise<void> {
      for (let i = 0; i < 10; i += 1) await Promise.resolve();
    },
    /** Answers the oldest step in flight (`claimed`: `jobs` jobs, by default all it asked for), then lets it go on. */
    async answer(result: ClaimStepResult, jobs?: number): Promise<void> {
      const step = pending.shift() as (typeof pending)[number];
      step.resolve({ result, jobs: result === 'claimed' ? (jobs ?? step.want) : 0 });
      await this.settle();
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

  it('opens with one job, then asks for every free slot in one batch with nothing beside it', async () => {
    const burst = scriptedBurst({ slots: 10 });
    expect(burst.wants()).toEqual([1]);
    await burst.answer('claimed');
    expect(burst.wants()).toEqual([9]);
    await burst.answer('claimed', 4); // took 4 of 9: 5 slots left
    expect(burst.wants()).toEqual([5]);
    await burst.answer('claimed');
    await expect(burst.done).resolves.toEqual({ end: 'full', everyClaimFailed: false });
  });

  it('caps a batch at claimBatchSize, and ends on the first batch that finds nothing', async () => {
    const burst = scriptedBurst({ slots: 100 });
    await burst.answer('claimed');
    expect(burst.wants()).toEqual([MAX_BATCH]);
    await burst.answer('claimed');
    expect(burst.wants()).toEqual([MAX_BATCH]);
    await burst.answer('empty');
    await expect(burst.done).resolves.toEqual({ end: 'empty', everyClaimFailed: false });
  });

  it('claims one job per step with claimBatchSize 1, several in flight once claims take jobs', async () => {
    const burst = scriptedBurst({ slots: 10, backlog: true, maxBatch: 1 });
    expect(burst.wants()).toEqual([1]);
    await burst.answer('claimed');
    expect(burst.wants()).toEqual([1]);
    await burst.answer('claimed');
    expect(burst.wants()).toEqual([1, 1]);
    await burst.answer('empty');
    await burst.answer('claimed');
    expect(burst.gathers()).toBe(0); // it never batches: nothing to gather for
    await expect(burst.done).resolves.toEqual({ end: 'empty', everyClaimFailed: false });
  });

  it('opens with a batch after a burst that filled every slot (a backlog)', async () => {
    const burst = scriptedBurst({ slots: 6, backlog: true });
    await burst.settle(); // it gathers first
    expect(burst.gathers()).toBe(1);
    expect(burst.wants()).toEqual([6]);
    await burst.answer('claimed');
    await expect(burst.done).resolves.toEqual({ end: 'full', everyClaimFailed: false });
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
    await mixed.answer('failed');
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

  it('lets finishing slots gather before each batch step, never before the opening single claim', async () => {
    const burst = scriptedBurst({ slots: 10 });
    expect(burst.wants()).toEqual([1]);
    expect(burst.gathers()).toBe(0);
    await burst.answer('claimed');
    expect(burst.gathers()).toBe(1);
    await burst.answer('claimed', 4);
    expect(burst.gathers()).toBe(2);
    await burst.answer('claimed');
    await expect(burst.done).resolves.toEqual({ end: 'full', everyClaimFailed: false });
    expect(burst.gathers()).toBe(2); // nothing left to claim: no gathering for nothing
  });

  it("sends a backlog's step only once the gathering ended, for the room there is then", async () => {
    let endGather = () => {};
    let free = 4; // 12 of 16 slots busy, their outcomes being written
    const burst = scriptedBurst({
      slots: () => free,
      backlog: true,
      gather: () => new Promise<void>((resolve) => (endGather = resolve)),
    });
    await burst.settle();
    expect(burst.gathers()).toBe(1);
    expect(burst.inFlight()).toBe(0);
    free = 16; // the outcomes landed
    endGather();
    await burst.settle();
    expect(burst.wants()).toEqual([16]);
    await burst.answer('claimed');
    await expect(burst.done).resolves.toEqual({ end: 'full', everyClaimFailed: false });
  });
});
