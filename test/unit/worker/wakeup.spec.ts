import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { Wakeup } from '../../../lib/worker/wakeup';

describe('Wakeup', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('sleeps for the interval when nobody wakes it', async () => {
    const wakeup = new Wakeup();
    let done = false;
    void wakeup.sleep(1000).then(() => {
      done = true;
    });
    await jest.advanceTimersByTimeAsync(999);
    expect(done).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    expect(done).toBe(true);
  });

  it('is cut short by wake() and clears its timer', async () => {
    const wakeup = new Wakeup();
    const slept = wakeup.sleep(1000);
    wakeup.wake();
    await slept;
    expect(jest.getTimerCount()).toBe(0);
  });

  it('remembers a wake() that came while nobody slept, once', async () => {
    const wakeup = new Wakeup();
    wakeup.wake();
    wakeup.wake();
    await wakeup.sleep(1000);
    let done = false;
    void wakeup.sleep(1000).then(() => {
      done = true;
    });
    await jest.advanceTimersByTimeAsync(500);
    expect(done).toBe(false);
  });

  it('shorten() ends the current sleep sooner, never later, and means nothing while nobody sleeps', async () => {
    const wakeup = new Wakeup();
    wakeup.shorten(10); // nobody sleeps: not remembered
    let done = false;
    void wakeup.sleep(1000).then(() => {
      done = true;
    });
    await jest.advanceTimersByTimeAsync(100);
    expect(done).toBe(false);
    wakeup.shorten(2000); // later than the sleep's end: no change
    wakeup.shorten(300);
    wakeup.shorten(500); // later than the shortened end: no change
    await jest.advanceTimersByTimeAsync(299);
    expect(done).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    expect(done).toBe(true);
    expect(jest.getTimerCount()).toBe(0);
  });
});
