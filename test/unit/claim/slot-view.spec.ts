import { describe, expect, it } from '@jest/globals';
import { Types } from 'mongoose';
import { concurrencySlotKey, groupSlotKey, parseGroupSlotKey, slotPrefix } from '../../../lib/claim/slot-keys';
import { SlotView } from '../../../lib/claim/slot-view';
import type { SlotHolder } from '../../../lib/persistence/claim-queries';

const now = new Date('2026-11-30T12:00:00Z');
const ahead = new Date(now.getTime() + 1000);
const past = new Date(now.getTime() - 1);

function holder(fields: Partial<SlotHolder>): SlotHolder {
  return {
    _id: new Types.ObjectId(),
    status: 'running',
    lockedUntil: ahead,
    attemptCount: 1,
    maxAttempts: 5,
    ...fields,
  };
}

describe('SlotView: what one read of the slot holders allows', () => {
  it('a running holder with a live lease takes its slot; the last free one is offered, then none', () => {
    const limits = { globalConcurrency: 2 };
    const one = new SlotView('n', limits, [holder({ concurrencySlot: concurrencySlotKey('n', 0) })], now);
    expect(one.freeConcurrencySlot()).toBe(concurrencySlotKey('n', 1));
    const both = new SlotView(
      'n',
      limits,
      [0, 1].map((i) => holder({ concurrencySlot: concurrencySlotKey('n', i) })),
      now,
    );
    expect(both.freeConcurrencySlot()).toBeNull();
    expect(new SlotView('n', {}, [], now).freeConcurrencySlot()).toBeUndefined();
  });

  it('a running holder whose lease ran out is expired (reclaimed with its slot), never freed', () => {
    const expired = holder({ lockedUntil: past, concurrencySlot: concurrencySlotKey('n', 0) });
    const view = new SlotView('n', { globalConcurrency: 1 }, [expired], now);
    expect(view.expired).toEqual([expired]);
    expect(view.endedConcurrencySlots).toEqual([]);
    expect(view.freeConcurrencySlot()).toBeNull();
  });

  it('a cancelled holder keeps its slot while its old deadline is ahead, and it ends once the deadline passed', () => {
    const key = concurrencySlotKey('n', 0);
    const live = new SlotView(
      'n',
      { globalConcurrency: 1 },
      [holder({ status: 'cancelled', concurrencySlot: key })],
      now,
    );
    expect(live.freeConcurrencySlot()).toBeNull();
    expect(live.endedConcurrencySlots).toEqual([]);
    for (const lockedUntil of [past, undefined]) {
      const ended = new SlotView(
        'n',
        { globalConcurrency: 1 },
        [holder({ status: 'cancelled', lockedUntil, concurrencySlot: key })],
        now,
      );
      expect(ended.endedConcurrencySlots).toEqual([key]);
      expect(ended.freeConcurrencySlot()).toBe(key);
    }
  });

  it('groups: a group with every slot taken is full; others get a free slot of their own; no group, no group slot', () => {
    const limits = { groupConcurrency: 2 };
    const view = new SlotView(
      'n',
      limits,
      [
        holder({ group: 'a', groupSlot: groupSlotKey('n', 'a', 0) }),
        holder({ group: 'a', groupSlot: groupSlotKey('n', 'a', 1) }),
        holder({ group: 'b', groupSlot: groupSlotKey('n', 'b', 0) }),
      ],
      now,
    );
    expect(view.fullGroups()).toEqual(['a']);
    expect(view.freeGroupSlot('a')).toBeNull();
    expect(view.freeGroupSlot('b')).toBe(groupSlotKey('n', 'b', 1));
    expect([0, 1].map((i) => groupSlotKey('n', 'c', i))).toContain(view.freeGroupSlot('c'));
    expect(view.freeGroupSlot(undefined)).toBeUndefined();
  });

  it('groups: null (ungrouped, as another tool may store it) and values that are no group get no group slot', () => {
    const view = new SlotView('n', { groupConcurrency: 1 }, [], now);
    for (const group of [null, 7, '', { tenant: 'a' }, ['a']]) expect(view.freeGroupSlot(group)).toBeUndefined();
  });

  it('a lowered limit: slots above it still held do not count towards the new one, and are never offered', () => {
    const view = new SlotView(
      'n',
      { globalConcurrency: 1, groupConcurrency: 1 },
      [holder({ concurrencySlot: concurrencySlotKey('n', 3), group: 'a', groupSlot: groupSlotKey('n', 'a', 3) })],
      now,
    );
    expect(view.freeConcurrencySlot()).toBe(concurrencySlotKey('n', 0));
    expect(view.fullGroups()).toEqual([]);
  });

  it('slot keys: names and groups with any characters cannot pass for one another; a group key round-trips', () => {
    expect(concurrencySlotKey('a",1', 0)).not.toBe(concurrencySlotKey('a', 1));
    expect(groupSlotKey('a","b', 'c', 0)).not.toBe(groupSlotKey('a', 'b","c', 0));
    expect(groupSlotKey('n', 'x', 2).startsWith(slotPrefix('n'))).toBe(true);
    expect(groupSlotKey('n2', 'x', 2).startsWith(slotPrefix('n'))).toBe(false);
    expect(concurrencySlotKey('n', 7).startsWith(slotPrefix('n'))).toBe(true);
    expect(concurrencySlotKey('n"', 7).startsWith(slotPrefix('n'))).toBe(false);
    expect(parseGroupSlotKey(groupSlotKey('n', 'tenant "7"', 4))).toEqual({ group: 'tenant "7"', index: 4 });
  });
});
