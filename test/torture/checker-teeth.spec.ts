import { describe, expect, it } from '@jest/globals';
import { notReached, reached, untilPreconditionReached } from '../support/precondition';
import { testMongoUri } from '../support/test-database';
import { brokenBuild } from './broken-build';
import { formatViolation, type Violation } from './checker';
import { runTorture, type TortureReport } from './torture-run';

/**
 * The checker's own test: the quick profile, run against a deliberately broken copy of the built package (patched
 * text, no test hook in the library), must report the invariant that the break violates. A run in which the workload
 * never exercised the broken path (the seed drew no such operation) is run again with the next seed; it never passes.
 * Each test may take three runs of about 8 s plus worker start-up, hence its timeout.
 */
describe('generative fault checker: a broken build is caught', () => {
  const SECONDS = 8;
  const TIMEOUT_MS = 3 * 40_000;

  async function caught(
    breakage: Parameters<typeof brokenBuild>[0],
    firstSeed: number,
    exercised: (report: TortureReport) => boolean,
  ): Promise<Violation[]> {
    const packagePath = brokenBuild(breakage);
    return untilPreconditionReached(`${breakage}: the workload exercised the broken path`, async (attempt) => {
      const seed = firstSeed + attempt - 1;
      const report = await runTorture({ seed, seconds: SECONDS, uri: testMongoUri(), packagePath });
      return exercised(report) ? reached(report.violations) : notReached(`seed ${seed} did not`);
    });
  }

  it(
    'a claim that ignores the owner filter: two live calls of one job overlap (invariant 1)',
    async () => {
      const violations = await caught('claim-ignores-owner', 2401, (report) => report.summary.handlerCalls >= 20);
      const overlap = violations.find((violation) => violation.invariant === 1);
      expect(overlap && formatViolation(overlap, 0)).toMatch(/invariant 1: two live handler calls of one job overlap/);
    },
    TIMEOUT_MS,
  );

  it(
    'a purge that deletes running rows: a row is deleted before it was final (invariant 3)',
    async () => {
      // A purge that deleted rows (the patch adds every running row of its names to what it deletes).
      const purgedSomething = (report: TortureReport) =>
        report.history.some(
          (line) =>
            line.type === 'op-answer' &&
            line.op === 'purge' &&
            ((line.answer as { value?: number } | undefined)?.value ?? 0) > 0,
        );
      const violations = await caught('purge-deletes-running', 2411, purgedSomething);
      const deleted = violations.find((violation) => violation.invariant === 3);
      expect(deleted && formatViolation(deleted, 0)).toMatch(/invariant 3: a row was deleted before it was final/);
    },
    TIMEOUT_MS,
  );
});
