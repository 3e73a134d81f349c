import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

/**
 * The built package (dist/, through package.json "exports") must load both from a CommonJS app
 * (NestJS 11 style, `require`) and from an ESM app (NestJS 12 style, `import`). `npm test` builds first.
 */
describe('built package', () => {
  let appDir: string;

  beforeAll(() => {
    appDir = mkdtempSync(join(tmpdir(), 'jobs-smoke-'));
    mkdirSync(join(appDir, 'node_modules'));
    symlinkSync(resolve('.'), join(appDir, 'node_modules', 'nestjs-mongo-jobs'), 'dir');
  });

  afterAll(() => rmSync(appDir, { recursive: true, force: true }));

  const run = (args: string[]) => execFileSync(process.execPath, args, { cwd: appDir, encoding: 'utf8' }).trim();

  it('loads with require() from a CommonJS app', () => {
    const out = run(['-e', "const m = require('nestjs-mongo-jobs'); console.log(Object.keys(m).sort().join(','))"]);
    expect(out.split(',')).toEqual(expect.arrayContaining(EXPECTED_EXPORTS));
  });

  it('loads with import from an ESM app, named exports included', () => {
    const out = run([
      '--input-type=module',
      '-e',
      `import * as m from 'nestjs-mongo-jobs'; import { ${EXPECTED_EXPORTS.join(', ')} } from 'nestjs-mongo-jobs'; console.log(Object.keys(m).sort().join(','))`,
    ]);
    expect(out.split(',')).toEqual(expect.arrayContaining(EXPECTED_EXPORTS));
  });

  it('loads the dashboard subpath with require() and import', () => {
    const names = ['JobsDashboardModule', 'DashboardGuardRequiredError', 'JobStateConflictError'];
    const cjs = run(['-e', "console.log(Object.keys(require('nestjs-mongo-jobs/dashboard')).join(','))"]);
    expect(cjs.split(',')).toEqual(expect.arrayContaining(names));
    const esm = run([
      '--input-type=module',
      '-e',
      `import { ${names.join(', ')} } from 'nestjs-mongo-jobs/dashboard'; console.log(typeof JobsDashboardModule.forRoot)`,
    ]);
    expect(esm).toBe('function');
  });

  it('loads the testing subpath with require() and import, and its context works', () => {
    const cjs = run([
      '-e',
      "const { createTestJobContext } = require('nestjs-mongo-jobs/testing'); console.log(createTestJobContext().attempt)",
    ]);
    expect(cjs).toBe('1');
    const esm = run([
      '--input-type=module',
      '-e',
      "import { createTestJobContext } from 'nestjs-mongo-jobs/testing'; const c = createTestJobContext(); await c.extendLockTime(5); console.log(c.extendLockTimeCalls.join())",
    ]);
    expect(esm).toBe('5');
  });
});

// Runtime exports only: JobExecutionContext, JobRecord, JobStatus, EnqueueOptions, RunNowOutcome and the options are types.
const EXPECTED_EXPORTS = [
  'JobsModule',
  'JobsService',
  'JobHandler',
  'UnrecoverableJobError',
  'LeaseLostError',
  'InvalidDurationError',
  'InvalidJobIdError',
  'InvalidPayloadError',
  'UnknownJobError',
  'JobsError',
  'JobsModuleImportedTwiceError',
  'MongooseConnectionMissingError',
  'RequestScopedJobHandlerError',
  'JobNotFoundError',
  'JobsExceptionFilter',
  'jobErrorMessage',
  'jobErrorStatus',
  'requireJob',
];
