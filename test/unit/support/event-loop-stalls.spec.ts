import { describe, expect, it } from '@jest/globals';
import { EventLoopStalls } from '../../support/event-loop-stalls';
import { sleep } from '../../support/sleep';

describe('EventLoopStalls', () => {
  it('reports a stall at least as long as a synchronous block of the event loop', async () => {
    const stalls = new EventLoopStalls();
    await sleep(30); // let the monitor's timer arm
    const until = Date.now() + 200;
    while (Date.now() < until) {
      // hold the event loop, as a long compilation or a GC pause would
    }
    await sleep(30); // let the monitor's timer fire late and record it
    expect(stalls.stop()).toBeGreaterThanOrEqual(150);
  });

  it('reports no long stall for an event loop that was free', async () => {
    const stalls = new EventLoopStalls();
    await sleep(50);
    // A bound, not a figure: whatever the machine's load, a free loop is not blocked for seconds.
    expect(stalls.stop()).toBeLessThan(5_000);
  });
});
