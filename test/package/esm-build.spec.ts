import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { resolve } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** The major of the installed `@nestjs/core`. */
const INSTALLED_NEST = String(createRequire(resolve('package.json'))('@nestjs/core/package.json').version).split(
  '.',
)[0];
/**
 * The package's ES module build (dist/esm/, the exports map's `import` condition). A NestJS 12 app is ES modules, and
 * its Jest (ESM mode) cannot require() ES modules such as NestJS 12 itself, so the CommonJS build fails there at its
 * first `require('@nestjs/common')`. Both tests reach the package by its name (Node's and Jest's self-reference through
 * the exports map), as an installed package is reached. `npm test` builds first.
 */
describe('the ES module build', () => {
  // A variable, so that TypeScript does not resolve the built package when typechecking (dist/ may not exist yet).
  const load = (specifier: string): Promise<Record<string, unknown>> => import(specifier);

  it('loads under Jest in ESM mode, as a NestJS 12 app tests its handlers', async () => {
    const root = await load('nestjs-mongo-jobs');
    const testing = await load('nestjs-mongo-jobs/testing');
    const dashboard = await load('nestjs-mongo-jobs/dashboard');
    const health = await load('nestjs-mongo-jobs/health');
    // ES modules: a CommonJS module imported by an ES module has a `default` export (its module.exports).
    for (const namespace of [root, testing, dashboard, health]) expect('default' in namespace).toBe(false);

    const JobHandler = root.JobHandler as (name: string) => MethodDecorator;
    class EmailJobs {
      @JobHandler('email.send')
      send(): void {}
    }
    expect(Reflect.getMetadata(root.JOB_HANDLER_METADATA as string, EmailJobs.prototype.send)).toMatchObject({
      name: 'email.send',
    });
    const createTestJobContext = testing.createTestJobContext as () => { attempt: number };
    expect(createTestJobContext().attempt).toBe(1);
    expect(typeof (dashboard.JobsDashboardModule as { forRoot: unknown }).forRoot).toBe('function');
    expect(typeof health.JobsHealthIndicator).toBe('function');
  });

  // From another directory: an installed package finds its dashboard page wherever the app was started.
  // The installed NestJS: 12 as locked, 11 in CI's NEST_MAJOR=11 cells (an ES module app imports NestJS 11 too).
  it(`runs a NestJS ${INSTALLED_NEST} app in Node from every entry, none of the CommonJS build loaded`, () => {
    const out = execFileSync(
      process.execPath,
      [resolve('test/package/esm-app/app.mjs'), testMongoUri(), uniqueDatabaseName('esm-build')],
      { cwd: tmpdir(), encoding: 'utf8', timeout: 30_000 },
    );
    const result = JSON.parse(out.trim().split('\n').pop() ?? '{}');
    expect(result.entries).toEqual({
      'nestjs-mongo-jobs': { file: 'dist/esm/index.js', commonJsDefault: false },
      'nestjs-mongo-jobs/testing': { file: 'dist/esm/testing/index.js', commonJsDefault: false },
      'nestjs-mongo-jobs/dashboard': { file: 'dist/esm/dashboard/index.js', commonJsDefault: false },
      'nestjs-mongo-jobs/health': { file: 'dist/esm/health/index.js', commonJsDefault: false },
    });
    // The one CommonJS file of the ES module build: the dashboard's directory (lib/dashboard/dashboard-directory.cts).
    expect(result.commonJsFiles).toEqual(['dist/esm/dashboard/dashboard-directory.cjs']);
    expect(result).toMatchObject({
      seen: { payload: { from: 'nest 12 esm' }, attempt: 1, fencingToken: 1 },
      status: 'completed',
      dashboard: {
        page: 200,
        pageType: 'text/html; charset=utf-8',
        baseHref: '/admin/jobs/',
        asset: 200,
        assetMatchesShipped: true,
      },
      health: 'up',
      testingAttempt: 2,
    });
    expect(result.nest.split('.')[0]).toBe(INSTALLED_NEST);
  }, 40_000);
});
