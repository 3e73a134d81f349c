import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { mongo } from 'mongoose';
import { sendOwnedWrite } from '../../../lib/claim/owned-write';
import type { ShutdownDeadline } from '../../../lib/model/shutdown-deadline';

const T0 = 1_000_000;
const noShutdown = { endsAt: undefined } as ShutdownDeadline;

/** The hand-back or dead-letter of a claim nobody runs: sent again through errors, by a fixed bound, never rejecting. */
describe('sendOwnedWrite', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: T0 });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('gives up at its bound, fixed when called, however fast the copies fail (a lease already over)', async () => {
    // The review's case: with a bound read as "now + 2 s" at each step, copies failing in 5 ms went on for ever.
    let copies = 0;
    const write = () => {
      copies += 1;
      return new Promise<boolean>((_, reject) => setTimeout(() => reject(new Error('not now')), 5));
    };
    let settled: boolean | undefined | 'pending' = 'pending';
    void sendOwnedWrite(write, async () => false, T0 + 2_000, noShutdown).then((value) => {
      settled = value;
    });
    await jest.advanceTimersByTimeAsync(2_100);
    expect(settled).toBeUndefined();
    const sent = copies;
    await jest.advanceTimersByTimeAsync(10_000);
    expect(copies).toBe(sent);
    expect(sent).toBeGreaterThan(3);
  });

  it('stops at the third refusal for the document (sending it again cannot help), not at a passing one', async () => {
    const refusal = new mongo.MongoServerError({ code: 121, errmsg: 'Document failed validation' });
    const write = jest.fn(async (): Promise<boolean> => {
      throw refusal;
    });
    const given = sendOwnedWrite(write, async () => false, T0 + 30_000, noShutdown);
    await jest.advanceTimersByTimeAsync(1_000);
    await expect(given).resolves.toBeUndefined();
    expect(write).toHaveBeenCalledTimes(3);
    let refusedOnce = false;
    const passing = async () => {
      if (refusedOnce) return true;
      refusedOnce = true;
      throw refusal;
    };
    const written = sendOwnedWrite(passing, async () => false, T0 + 30_000, noShutdown);
    await jest.advanceTimersByTimeAsync(100);
    await expect(written).resolves.toBe(true);
  });

  it('counts its own earlier copy that landed with its answer lost: a miss asks finishedBy', async () => {
    let first = true;
    const write = async () => {
      if (first) {
        first = false;
        throw new mongo.MongoNetworkError('connection closed'); // landed, answer lost
      }
      return false; // the row no longer matches: it was this write's own doing
    };
    const landed = jest.fn(async () => true);
    const written = sendOwnedWrite(write, landed, T0 + 30_000, noShutdown);
    await jest.advanceTimersByTimeAsync(100);
    await expect(written).resolves.toBe(true);
    expect(landed).toHaveBeenCalledTimes(1);
  });

  it("answers false when the row is no longer under this lock, and stops at shutdown's hard bound", async () => {
    await expect(
      sendOwnedWrite(
        async () => false,
        async () => false,
        T0 + 30_000,
        noShutdown,
      ),
    ).resolves.toBe(false);
    const hung = () => new Promise<boolean>(() => undefined);
    const shuttingDown = { endsAt: T0 + 500 } as ShutdownDeadline;
    let settled: boolean | undefined | 'pending' = 'pending';
    void sendOwnedWrite(hung, async () => false, T0 + 30_000, shuttingDown).then((value) => {
      settled = value;
    });
    await jest.advanceTimersByTimeAsync(499);
    expect(settled).toBe('pending');
    await jest.advanceTimersByTimeAsync(2);
    expect(settled).toBeUndefined();
  });
});
