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
    const slots = new FinishingSlots(pacing);
    expect(
      await resolvedWithin(
        slots.gather(
          0,
          () => 1,
          () => false,
        ),
        0,
      ),
    ).toBe(true);
    expect(pacing.waits).toEqual([]);
  });

  it('lets one turn pass, then claims at once when no more slots are finishing than are free', async () => {
    const pacing = fakePacing();
    const slots = new FinishingSlots(pacing);
    slots.handlerSettled();
    const gathering = slots.gather(
      15,
      () => 1,
      () => false,
    );
    expect(await resolvedWithin(gathering, 0)).toBe(true); // the turn (setImmediate) passed
    expect(pacing.waits).toEqual([]);
  });

  it('waits while more slots are finishing than are free, until enough have freed', async () => {
    const pacing = fakePacing();
    const slots = new FinishingSlots(pacing);
    let room = 1;
    for (let i = 0; i < 3; i += 1) slots.handlerSettled();
    const gathering = slots.gather(
      15,
      () => room,
      () => false,
    );
    expect(await resolvedWithin(gathering, 10)).toBe(false);
    expect(pacing.waits).toEqual([GATHER_MAX_MS]);
    // One frees: 2 finishing, 2 free: enough.
    slots.freed();
    room = 2;
    pacing.wake();
    expect(await resolvedWithin(gathering, 0)).toBe(true);
  });

  it(`waits ${GATHER_MAX_MS} ms at most for an outcome write that does not land`, async () => {
    const pacing = fakePacing();
    const slots = new FinishingSlots(pacing);
    for (let i = 0; i < 3; i += 1) slots.handlerSettled();
    const gathering = slots.gather(
      15,
      () => 1,
      () => false,
    );
    expect(await resolvedWithin(gathering, GATHER_MAX_MS - 1)).toBe(false);
    expect(await resolvedWithin(gathering, 1)).toBe(true);
  });

  it('gives up at once when the worker begins to stop', async () => {
    const pacing = fakePacing();
    const slots = new FinishingSlots(pacing);
    let stopping = false;
    for (let i = 0; i < 3; i += 1) slots.handlerSettled();
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
    const slots = new FinishingSlots(pacing);
    for (let i = 0; i < 2; i += 1) slots.handlerSettled();
    const gathering = slots.gather(
      15,
      () => 1,
      () => false,
    );
    expect(await resolvedWithin(gathering, 10)).toBe(false);
    pacing.wake();
    expect(await resolvedWithin(gathering, 0)).toBe(false);
    expect(pacing.waits).toEqual([GATHER_MAX_MS, GATHER_MAX_MS - 10]);
  });
});
