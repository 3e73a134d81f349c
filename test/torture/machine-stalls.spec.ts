import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import type { HistoryLine, HistoryWriter } from './history';
import { MachineStalls, stalledWithin } from './machine-stalls';

describe('MachineStalls', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: 10_000 });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it("records a stall when the runner's timer finds a second or more since it last fired, and nothing otherwise", () => {
    const lines: Partial<HistoryLine>[] = [];
    const writer = { record: (line: Partial<HistoryLine>) => void lines.push(line) };
    const stalls = new MachineStalls(writer as unknown as HistoryWriter);
    stalls.start();
    jest.advanceTimersByTime(1_000); // ten ticks on time
    expect(lines).toEqual([]);
    // The process stands still: its clock moves 2.5 s with no tick, then the next tick comes.
    jest.setSystemTime(Date.now() + 2_500);
    jest.advanceTimersByTime(100);
    expect(lines).toEqual([{ type: 'stall', from: 11_000, ms: 2_600, t: 13_600 }]);
    stalls.stop();
  });

  it('sums the overlap of the runner stalls with a window, and ignores the stalls of other processes', () => {
    const lines = [
      { t: 3_000, p: 'runner', type: 'stall', from: 1_000, ms: 2_000 },
      { t: 8_000, p: 'runner', type: 'stall', from: 7_000, ms: 1_000 },
      { t: 6_000, p: 'w0.1', type: 'stall', from: 4_000, ms: 2_000 },
    ];
    expect(stalledWithin(lines, 2_000, 7_500)).toBe(1_000 + 500);
    expect(stalledWithin(lines, 3_000, 7_000)).toBe(0);
  });
});
