import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/**
 * The dual-package hazard: an ES module app whose CommonJS dependency requires the package loads both builds, two
 * copies with distinct classes. What must work across them does: the handler metadata key and an unrecoverable error
 * are recognised by the other copy, and two JobsModules (two workers) are refused at bootstrap. `npm test` builds first.
 */
describe('both builds in one process', () => {
  it('runs the CommonJS copy’s handler in the ES module copy’s worker, and refuses a JobsModule from each', () => {
    const out = execFileSync(
      process.execPath,
      ['test/package/esm-app/dual-package.mjs', testMongoUri(), uniqueDatabaseName('dual-package')],
      { encoding: 'utf8', timeout: 30_000 },
    );
    const result = JSON.parse(out.trim().split('\n').pop() ?? '{}');
    expect(result.files).toEqual({
      import: pathToFileURL(resolve('dist/esm/index.js')).href,
      require: resolve('dist/index.js'),
    });
    expect(result.twoCopies).toBe(true);
    // Dead at its first attempt (maxAttempts 3): the error class is the CommonJS copy's, the check the other's.
    expect(result.handler).toEqual({ status: 'dead', attemptCount: 1, errorClass: 'UnrecoverableJobError' });
    expect(result.bothModules).toMatchObject({ started: false, error: 'JobsModuleImportedTwiceError' });
    expect(result.bothModules.message).toContain('both the CommonJS and the ES module build');
  }, 40_000);
});
