import { describe, expect, it } from '@jest/globals';
import {
  MAX_SCENARIO_ATTEMPTS,
  notReached,
  PreconditionNotReachedError,
  reached,
  untilPreconditionReached,
} from '../../support/precondition';

describe('untilPreconditionReached (test helper for chaos scenarios)', () => {
  const quiet = { log: () => {} };

  it('runs the scenario once when its precondition happens, and resolves its value', async () => {
    const attempts: number[] = [];
    const value = await untilPreconditionReached('a victim', async (attempt) => {
      attempts.push(attempt);
      return reached('checked');
    });
    expect(value).toBe('checked');
    expect(attempts).toEqual([1]);
  });

  it('runs the whole scenario again when its precondition did not happen, numbering and reporting the attempts', async () => {
    const attempts: number[] = [];
    const log: string[] = [];
    const value = await untilPreconditionReached(
      'a victim',
      async (attempt) => {
        attempts.push(attempt);
        return attempt < 3 ? notReached(`run ${attempt}: every job finished before the kill`) : reached(attempt);
      },
      { log: (line) => log.push(line) },
    );
    expect(value).toBe(3);
    expect(attempts).toEqual([1, 2, 3]);
    expect(log).toEqual([
      'precondition not reached (a victim), attempt 1 of 3: run 1: every job finished before the kill',
      'precondition not reached (a victim), attempt 2 of 3: run 2: every job finished before the kill',
    ]);
  });

  it(`gives up after ${MAX_SCENARIO_ATTEMPTS} missed runs with "precondition not reached", and what each run saw`, async () => {
    let runs = 0;
    const never = untilPreconditionReached(
      'a stall that catches a live lease',
      async (attempt) => {
        runs += 1;
        return notReached(`no live lease at stall ${attempt}`);
      },
      quiet,
    );
    await expect(never).rejects.toThrow(PreconditionNotReachedError);
    await expect(never).rejects.toThrow(
      /^precondition not reached: a stall that catches a live lease \(3 attempts: 1\. no live lease at stall 1; 2\. no live lease at stall 2; 3\. no live lease at stall 3\)$/,
    );
    expect(runs).toBe(MAX_SCENARIO_ATTEMPTS);
  });

  it('never resolves when the precondition never happened, whatever the attempt budget', async () => {
    for (const budget of [1, 2, 5]) {
      let runs = 0;
      const outcome = await untilPreconditionReached(
        'a late claim',
        async () => {
          runs += 1;
          return notReached('the claim was on time');
        },
        { ...quiet, maxAttempts: budget },
      ).then(
        () => 'passed',
        (error: Error) => error.message,
      );
      expect(outcome).toMatch(/^precondition not reached: a late claim/);
      expect(runs).toBe(budget);
    }
  });

  it('does not retry a run that failed: an assertion error or a timeout fails the test at once', async () => {
    let runs = 0;
    const failing = untilPreconditionReached('a victim', async () => {
      runs += 1;
      throw new Error('two live owners');
    });
    await expect(failing).rejects.toThrow('two live owners');
    expect(runs).toBe(1);
  });
});
