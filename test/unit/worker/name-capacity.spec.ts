import { describe, expect, it } from '@jest/globals';
import { NameCapacity } from '../../../lib/worker/name-capacity';

describe('NameCapacity', () => {
  const limits: Record<string, number> = { a: 2, b: 1 };
  const capacity = () => new NameCapacity((name) => limits[name] ?? Number.POSITIVE_INFINITY);

  it('saturates a name once its running executions and the claims that may return it reach its limit', () => {
    const names = capacity();
    names.adjustRunning('a', +1);
    expect(names.saturated()).toEqual([]);
    names.adjustClaiming(['a', 'b'], +1);
    expect(names.saturated().sort()).toEqual(['a', 'b']);
    names.adjustClaiming(['a', 'b'], -1);
    expect(names.saturated()).toEqual([]);
    names.adjustRunning('a', +1);
    expect(names.saturated()).toEqual(['a']);
    expect(names.runningOf('a')).toBe(2);
  });

  it('forgets a name whose counts are back to zero, and never saturates an unlimited one', () => {
    const names = capacity();
    names.adjustRunning('a', +1);
    names.adjustRunning('a', -1);
    expect(names.runningOf('a')).toBe(0);
    for (let i = 0; i < 100; i += 1) names.adjustRunning('other', +1);
    names.adjustClaiming(['other'], +1);
    expect(names.saturated()).toEqual([]);
  });
});
