import { describe, expect, it } from '@jest/globals';
import { testMongoUri } from '../support/test-database';
import { brokenBuild } from './broken-build';
import { formatViolation, type Violation } from './checker';
import { runTorture, type TortureReport } from './torture-run';

/**
 * The checker's own test: the quick profile, run against a deliberately broken copy of the built package (patched
 * text, no test hook in the library), must report the invariant that the break violates. A run in which the workload
 * never exercised the broken path (the seed drew no such operation) is run again with the next seed; it never passes.
 */
describe('generative fault checker: a broken build is caught', () => {
  const SECONDS = 8;

  async function caught(
    breakage: Parameters<typeof brokenBuild>[0],
    firstSeed: number,
    exercised: (report: TortureReport) => boolean,
  ): Promise<Violation[]> {
    const packagePath = brokenBuild(breakage);
    for (let seed = firstSeed; seed < firstSeed + 3; seed += 1) {
      const report = await runTorture({ seed, seconds: SECONDS, uri: testMongoUri(), packagePath });
      if (exercised(report)) return report.violations;
    }
    throw new Error(`${breakage}: three seeds in a row never exercised the broken path`);
  }

  it('a claim that ignores the owner filter: two live calls of one job overlap (invariant 1)', async () => {
    const violations = await caught('claim-ignores-owner', 2401, (report) => report.summary.handlerCalls >= 20);
    const overlap = violations.find((violation) => violation.invariant === 1);
    expect(overlap && formatViolation(overlap, 0)).toMatch(/invariant 1: two live handler calls of one job overlap/);
  }, 60_000);

  it('a purge that deletes running rows: a row is deleted before it was final (invariant 3)', async () => {
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
  }, 60_000);
});
