import { describe, expect, it } from '@jest/globals';
import { Types } from 'mongoose';
import { SetAsideIds } from '../../../lib/claim/set-aside-ids';

describe('SetAsideIds', () => {
  it('forgets the oldest id beyond its capacity, and a re-added id counts as new', () => {
    const ids = Array.from({ length: 4 }, () => new Types.ObjectId());
    const memory = new SetAsideIds(3);
    for (const id of ids.slice(0, 3)) memory.add(id);
    memory.add(ids[0]);
    memory.add(ids[3]);
    expect(memory.values().map((id) => id.toHexString())).toEqual(
      [ids[2], ids[0], ids[3]].map((id) => id.toHexString()),
    );
  });

  it('hands out the same array until the next add (no copy per claim)', () => {
    const memory = new SetAsideIds(3);
    memory.add(new Types.ObjectId());
    const first = memory.values();
    expect(memory.values()).toBe(first);
    memory.add(new Types.ObjectId());
    expect(memory.values()).not.toBe(first);
    expect(memory.values()).toHaveLength(2);
  });
});
