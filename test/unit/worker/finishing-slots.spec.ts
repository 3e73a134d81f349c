import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { FinishingSlots, GATHER_MAX_MS } from '../../../lib/worker/finishing-slots';

/** A pacing whose wait ends on `wake()` or after its `ms` (fake timers), as `PollPacing.wait` does. */
function fakePacing() {
  let wakeUp: (() => void) | undefined;
  const waits: number[] = [];
  return {
    waits,
    wait(ms: number): Promise<void> {
      waits.push(ms);
      return new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    },
    wake: () => wakeUp?.(),
  };
}

/** `gather` with `busy` slots running, `free` free, and no shutdown. */
const gatherAt = (slots: FinishingSlots, busy: number, free: number) =>
  slots.gather(
    busy,
    () => free,
    () => false,
  );

describe('FinishingSlots', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: 1_000_000 });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  /** Settles `gather`'s promise as far as timers up to `ms` allow; says whether it resolved. */
  async function resolvedWithin(gathering: Promise<void>, ms: number): Promise<boolean> {
    let done = false;
    void gathering.then(() => (done = true));
    await jest.advanceTimersByTimeAsync(ms);
    return done;
  }

  it('returns at once when no slot is busy: nothing can be finishing', async () => {
    const pacing = fakePacing();
    const slots = new FinishingSlots(pacing, () => Date.now());
    expect(await resolvedWithin(gatherAt(slots, 0, 1), 0)).toBe(true);
    expect(pacing.waits).toEqual([]);
  });

  it('lets one turn pass, then claims at once when no more slots are finishing than are free', async () => {
    const pacing = fakePacing();
    const slots = new FinishingSlots(pacing, () => Date.now());
    slots.handlerSettled({});
    const gathering = gatherAt(slots, 15, 1);
    expect(await resolvedWithin(gathering, 0)).toBe(true); // the turn (setImmediate) passed
    expect(pacing.waits).toEqual([]);
  });

  it('waits while more slots are finishing than are free, until enough have freed', async () => {
    const pacing = fakePacing();
    const slots = new FinishingSlots(pacing, () => Date.now());
    let room = 1;
    const executions = [{}, {}, {}];
    for (const execution of executions) slots.handlerSettled(execution);
    const gathering = slots.gather(
      15,
      () => room,
      () => false,
    );
    expect(await resolvedWithin(gathering, 10)).toBe(false);
    expect(pacing.waits).toEqual([GATHER_MAX_MS]);
    // One frees: 2 finishing, 2 free: enough.
    slots.freed(executions[0]);
    room = 2;
    pacing.wake();
    expect(await resolvedWithin(gathering, 0)).toBe(true);
  });

  it(`waits ${GATHER_MAX_MS} ms at most for an outcome write that does not land`, async () => {
    const pacing = fakePacing();
    const slots = new FinishingSlots(pacing, () => Date.now());
    for (let i = 0; i < 3; i += 1) slots.handlerSettled({});
    const gathering = gatherAt(slots, 15, 1);
    expect(await resolvedWithin(gathering, GATHER_MAX_MS - 1)).toBe(false);
    expect(await resolvedWithin(gathering, 1)).toBe(true);
  });

  it('gives up at once when the worker begins to stop', async () => {
    const pacing = fakePacing();
    const slots = new FinishingSlots(pacing, () => Date.now());
    let stopping = false;
    for (let i = 0; i < 3; i += 1) slots.handlerSettled({});
    const gathering = slots.gather(
      15,
      () => 1,
      () => stopping,
    );
    expect(await resolvedWithin(gathering, 10)).toBe(false);
    stopping = true;
    pacing.wake(); // shutdown wakes the pacing
    expect(await resolvedWithin(gathering, 0)).toBe(true);
  });

  it('goes on waiting after a wake that freed nothing (an enqueue, say)', async () => {
    const pacing = fakePacing();
    const slots = new FinishingSlots(pacing, () => Date.now());
    for (let i = 0; i < 2; i += 1) slots.handlerSettled({});
    const gathering = gatherAt(slots, 15, 1);
    expect(await resolvedWithin(gathering, 10)).toBe(false);
    pacing.wake();
    expect(await resolvedWithin(gathering, 0)).toBe(false);
    expect(pacing.waits).toEqual([GATHER_MAX_MS, GATHER_MAX_MS - 10]);
  });

  it('does not wait for slots finishing longer than the bound: their outcome writes are retrying, not about to land', async () => {
    const pacing = fakePacing();
    const slots = new FinishingSlots(pacing, () => Date.now());
    const stuck = [{}, {}];
    for (const execution of stuck) slots.handlerSettled(execution);
    // The first gather after they settled waits its bound (they could have landed by then)…
    expect(await resolvedWithin(gatherAt(slots, 3, 1), GATHER_MAX_MS)).toBe(true);
    // …but from then on a claim into the free slot goes at once, however long the writes keep failing.
    for (let i = 0; i < 5; i += 1) {
      expect(await resolvedWithin(gatherAt(slots, 3, 1), 0)).toBe(true);
    }
    expect(pacing.waits).toEqual([GATHER_MAX_MS]);
    // A job that just settled beside them is about to free: one against one free slot is no reason to wait, two are.
    const fresh = [{}, {}];
    slots.handlerSettled(fresh[0]);
    expect(await resolvedWithin(gatherAt(slots, 3, 1), 0)).toBe(true);
    slots.handlerSettled(fresh[1]);
    const gathering = gatherAt(slots, 4, 1);
    expect(await resolvedWithin(gathering, 10)).toBe(false);
    expect(pacing.waits).toEqual([GATHER_MAX_MS, GATHER_MAX_MS]);
    // The stuck ones free at last (from the front of the count): the two fresh ones are still what it waits for…
    slots.freed(stuck[1]);
    slots.freed(stuck[0]);
    pacing.wake();
    expect(await resolvedWithin(gathering, 0)).toBe(false);
    // …until one of them frees.
    slots.freed(fresh[0]);
    pacing.wake();
    expect(await resolvedWithin(gathering, 0)).toBe(true);
  });

  it('frees a slot whose handler never settled without counting anything', async () => {
    const pacing = fakePacing();
    const slots = new FinishingSlots(pacing, () => Date.now());
    slots.freed({}); // set aside, handed back, or its run threw: never counted
    slots.handlerSettled({});
    expect(await resolvedWithin(gatherAt(slots, 2, 1), 0)).toBe(true); // 1 finishing, 1 free
    expect(pacing.waits).toEqual([]);
  });
});
