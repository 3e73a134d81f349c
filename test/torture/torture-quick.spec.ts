import { describe, expect, it } from '@jest/globals';
import { notReached, reached, untilPreconditionReached } from '../support/precondition';
import { testMongoUri } from '../support/test-database';
import { formatViolation, type RunSummary } from './checker';
import { knownOpenBreak } from './known-open';
import { runTorture } from './torture-run';

/** Enough happened for the run to mean something: operations, handler calls and injected command faults. */
function exercised(summary: RunSummary): boolean {
  const operations = Object.values(summary.operations).reduce((sum, count) => sum + count, 0);
  const commandFaults = Object.entries(summary.faults)
    .filter(([key]) => key.includes(':'))
    .reduce((sum, [, count]) => sum + count, 0);
  return operations >= 40 && summary.handlerCalls >= 30 && commandFaults >= 5;
}

/**
 * The generative fault checker's quick profile (issue 24) inside `npm test`: three worker processes (two behind a
 * FaultProxy) and a driver, 10 s of random operations and faults, then the checker. A run in which the planned
 * faults did not happen (a machine so loaded that little ran) is run again with the next seed, never passed; but its
 * violations count all the same. Violations of breaks that an open issue is fixing (known-open.ts) are printed, not
 * failed on. Up to three runs of 10 s plus worker start-up, hence the timeout.
 */
describe('generative fault checker: quick profile', () => {
  const FIRST_SEED = 2424;

  it(
    'finds no violation outside the open issues in 10 s of random operations and faults',
    async () => {
      await untilPreconditionReached('enough operations, handler calls and command faults', async (attempt) => {
        const seed = FIRST_SEED + attempt - 1;
        const { summary, violations } = await runTorture({ seed, seconds: 10, uri: testMongoUri() });
        const tolerated = violations.filter((violation) => knownOpenBreak(violation) !== undefined);
        if (tolerated.length > 0) {
          const issues = [...new Set(tolerated.map((violation) => knownOpenBreak(violation)?.issue))].join(', ');
          process.stdout.write(
            `quick profile, seed ${seed}: ${tolerated.length} violation(s) of open issue(s) ${issues}\n`,
          );
        }
        const unexpected = violations.filter((violation) => knownOpenBreak(violation) === undefined);
        expect(unexpected.map((violation) => formatViolation(violation, seed)).join('\n\n')).toBe('');
        return exercised(summary) ? reached() : notReached(`seed ${seed}: ${JSON.stringify(summary.operations)}`);
      });
    },
    3 * 40_000,
  );
});
