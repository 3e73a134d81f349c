import { describe, expect, it } from '@jest/globals';
import { SlotReservation } from '../../../lib/worker/slot-reservation';

describe('SlotReservation', () => {
  it('ends once: released unused (the slot is free again), or passed to its job (the slot stays taken)', () => {
    const ends: boolean[] = [];
    const released = new SlotReservation((freed) => ends.push(freed));
    released.release();
    released.release();
    released.passToJob();
    const passed = new SlotReservation((freed) => ends.push(freed));
    passed.passToJob();
    // runNow's `finally` releases after the job started: no second end, so the slot is not counted free twice.
    passed.release();
    expect(ends).toEqual([true, false]);
  });
});
