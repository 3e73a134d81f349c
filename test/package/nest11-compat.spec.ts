import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from '@jest/globals';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/**
 * The peer ranges promise NestJS 11 and mongoose 8 too. A real CommonJS Nest 11 app (installed from the npm
 * registry into the git-ignored .cache/ on first run) loads the built dist/ with require(), runs a job and serves it
 * through the dashboard's JSON API (its controller path is set per forRoot, which both Nest 11 and 12 must honour).
 * The same app as ES modules gets the ES module build (dist/esm/), importing from NestJS 11's CommonJS.
 */
describe('a NestJS 11 + mongoose 8 app', () => {
  const appDir = resolve('.cache', 'nest11-app');

  beforeAll(() => {
    mkdirSync(appDir, { recursive: true });
    cpSync(resolve('test/package/nest11-app'), appDir, { recursive: true });
    if (!existsSync(join(appDir, 'node_modules', '@nestjs', 'platform-express'))) {
      execFileSync('npm', ['install', '--no-audit', '--no-fund', '--no-package-lock'], {
        cwd: appDir,
        stdio: 'ignore',
      });
    }
    // The package as an app installs it: what `files` ships (dist/, and lib/ with the dashboard page) and
    // package.json (its exports map) under node_modules.
    const installed = join(appDir, 'node_modules', 'nestjs-mongo-jobs');
    rmSync(installed, { recursive: true, force: true });
    mkdirSync(installed, { recursive: true });
    cpSync(resolve('dist'), join(installed, 'dist'), { recursive: true });
    cpSync(resolve('lib'), join(installed, 'lib'), { recursive: true });
    cpSync(resolve('package.json'), join(installed, 'package.json'));
  }, 120_000);

  it('requires the built package and runs a job to completion (CommonJS)', () => {
    const out = execFileSync(process.execPath, ['app.cjs', testMongoUri(), uniqueDatabaseName('nest11')], {
      cwd: appDir,
      encoding: 'utf8',
      timeout: 30_000,
    });
    const result = JSON.parse(out.trim().split('\n').pop() ?? '{}');
    expect(result).toMatchObject({
      seen: { payload: { from: 'nest 11 cjs' }, attempt: 1, fencingToken: 1 },
      status: 'completed',
      dashboard: { read: 200, job: 'completed', unsafe: 403 },
    });
    expect(result.nest).toMatch(/^11\./);
    expect(result.mongoose).toMatch(/^8\./);
  }, 40_000);

  it('imports the ES module build and runs a job to completion (ES modules)', () => {
    const out = execFileSync(process.execPath, ['app.mjs', testMongoUri(), uniqueDatabaseName('nest11esm')], {
      cwd: appDir,
      encoding: 'utf8',
      timeout: 30_000,
    });
    const result = JSON.parse(out.trim().split('\n').pop() ?? '{}');
    expect(result).toMatchObject({
      file: join(appDir, 'node_modules', 'nestjs-mongo-jobs', 'dist', 'esm', 'index.js'),
      seen: { payload: { from: 'nest 11 esm' }, attempt: 1 },
      status: 'completed',
      dashboard: { page: 200, read: 200 },
    });
    expect(result.nest).toMatch(/^11\./);
  }, 40_000);
});
