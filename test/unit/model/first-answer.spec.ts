import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { firstAnswer, type HedgeSchedule } from '../../../lib/model/first-answer';

const T0 = 1_000_000;
const SCHEDULE: HedgeSchedule = { hedgeMs: 250, maxInFlight: 3, retry: { baseMs: 50, maxMs: 1_000 } };

/** A request whose copies the test answers, fails or leaves hanging, each by the order it was sent in. */
function controllable<T>() {
  const copies: { sentAt: number; resolve: (value: T) => void; reject: (error: Error) => void }[] = [];
  const request = () =>
    new Promise<T>((resolve, reject) => {
      copies.push({ sentAt: Date.now() - T0, resolve, reject });
    });
  return { request, copies, sentAt: () => copies.map((copy) => copy.sentAt) };
}

describe('firstAnswer', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: T0 });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('sends a copy beside a hung one after 250 ms, then 500 ms later, at most 3 in flight; the first answer wins', async () => {
    const { request, copies, sentAt } = controllable<string>();
    const answer = firstAnswer(request, () => T0 + 10_000, SCHEDULE);
    await jest.advanceTimersByTimeAsync(2_000);
    expect(sentAt()).toEqual([0, 250, 750]);
    copies[2].resolve('third');
    copies[0].resolve('first, too late');
    await expect(answer).resolves.toEqual({ value: 'third' });
  });

  it('follows a failed copy with another after a backoff of 50 ms, doubling', async () => {
    const { request, copies, sentAt } = controllable<string>();
    const answer = firstAnswer(request, () => T0 + 10_000, SCHEDULE);
    copies[0].reject(new Error('refused'));
    await jest.advanceTimersByTimeAsync(50);
    copies[1].reject(new Error('refused'));
    await jest.advanceTimersByTimeAsync(100);
    expect(sentAt()).toEqual([0, 50, 150]);
    copies[2].resolve('ok');
    await expect(answer).resolves.toEqual({ value: 'ok' });
  });

  it('gives up at giveUpAt, with copies hung or failing, and sends nothing after', async () => {
    const hung = controllable<string>();
    const hungAnswer = firstAnswer(hung.request, () => T0 + 600, SCHEDULE);
    await jest.advanceTimersByTimeAsync(600);
    await expect(hungAnswer).resolves.toBeUndefined();
    expect(hung.sentAt()).toEqual([0, 250]);

    const failing = { count: 0 };
    const failingAnswer = firstAnswer(
      () => {
        failing.count += 1;
        return Promise.reject(new Error('down'));
      },
      () => Date.now() + (failing.count < 4 ? 1_000 : 0), // the window closes after the fourth copy
      SCHEDULE,
    );
    await jest.advanceTimersByTimeAsync(1_000);
    await expect(failingAnswer).resolves.toBeUndefined();
    expect(failing.count).toBe(4);
  });

  it('answers a falsy value as an answer (null: the read found nothing)', async () => {
    await expect(
      firstAnswer(
        () => Promise.resolve(null),
        () => T0 + 1_000,
        SCHEDULE,
      ),
    ).resolves.toEqual({ value: null });
  });
});
