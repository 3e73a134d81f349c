import { describe, expect, it } from '@jest/globals';
import { backoffDelayMs } from '../../../lib/model/backoff';

describe('backoffDelayMs', () => {
  const backoff = { baseMs: 1000, maxMs: 10_000 };

  it('doubles per failed attempt up to maxMs (random = 1 − ε gives the nominal delay)', () => {
    const top = () => 0.999_999_999;
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffDelayMs(n, backoff, top))).toEqual([
      1000, 2000, 4000, 8000, 10_000, 10_000,
    ]);
  });

  it('never goes below half the nominal delay (equal jitter)', () => {
    expect([1, 2, 3, 4, 5].map((n) => backoffDelayMs(n, backoff, () => 0))).toEqual([500, 1000, 2000, 4000, 5000]);
  });

  it('scales linearly with the random source in between', () => {
    expect(backoffDelayMs(3, backoff, () => 0.5)).toBe(3000);
    expect(backoffDelayMs(2, { baseMs: 100, maxMs: 150 }, () => 0.5)).toBe(113);
  });
});
