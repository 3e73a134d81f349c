import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { ClaimSkips, UNLIMITED } from '../../../lib/claim/claim-skips';

const POLL_MS = 1000;

describe('ClaimSkips: what a process with limited names skips until its next poll', () => {
  let skips: ClaimSkips;
  beforeEach(() => {
    jest.useFakeTimers({ now: new Date('2026-11-30T12:00:00Z') });
    skips = new ClaimSkips(POLL_MS);
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('a name found full is skipped for one poll interval, or until one of its executions here ends', () => {
    skips.markFull('a');
    expect(skips.isSkipped('a')).toBe(true);
    expect(skips.isSkipped('b')).toBe(false);
    jest.advanceTimersByTime(POLL_MS);
    expect(skips.isSkipped('a')).toBe(false);
    skips.markFull('a');
    skips.slotFreed('a');
    expect(skips.isSkipped('a')).toBe(false);
  });

  it('an arrival clears every empty mark but no full one', () => {
    skips.markEmpty('a', skips.arrivals);
    skips.markEmpty(UNLIMITED, skips.arrivals);
    skips.markFull('b');
    expect([skips.isSkipped('a'), skips.isSkipped(UNLIMITED), skips.isSkipped('b')]).toEqual([true, true, true]);
    skips.jobsArrived();
    expect([skips.isSkipped('a'), skips.isSkipped(UNLIMITED), skips.isSkipped('b')]).toEqual([false, false, true]);
  });

  it('a claim that began before an arrival does not mark its entry empty after it', () => {
    const atStart = skips.arrivals;
    skips.jobsArrived(); // a job enqueued here while the claim was in flight
    skips.markEmpty(UNLIMITED, atStart);
    expect(skips.isSkipped(UNLIMITED)).toBe(false);
    skips.markEmpty(UNLIMITED, skips.arrivals);
    expect(skips.isSkipped(UNLIMITED)).toBe(true);
  });

  it('expired leases of a name are searched for once per poll interval, and again at once after a find', () => {
    expect(skips.startReclaimSearch('a')).toBe(true);
    expect(skips.startReclaimSearch('a')).toBe(false); // a second claim in flight
    expect(skips.startReclaimSearch('b')).toBe(true);
    skips.reclaimFound('a');
    expect(skips.startReclaimSearch('a')).toBe(true);
    jest.advanceTimersByTime(POLL_MS - 1);
    expect(skips.startReclaimSearch('a')).toBe(false);
    jest.advanceTimersByTime(1);
    expect(skips.startReclaimSearch('a')).toBe(true);
  });
});
