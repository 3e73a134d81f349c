import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

/**
 * NEST_MAJOR, which CI's matrix sets: `scripts/use-nest-major.mjs` installs that major's NestJS packages (.ci/run) and,
 * with `--check`, refuses a node_modules/ holding another major (jest's global setup), so a "nest 11" job cannot pass
 * on NestJS 12. Run in a scratch root with a fake node_modules/: nothing is installed here (that needs the registry).
 */
describe('NEST_MAJOR: the NestJS major the suite runs on', () => {
  let root: string;

  const writeJson = (path: string, value: unknown) => {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), `${JSON.stringify(value)}\n`);
  };
  const installNest = (version: string, names = ['common', 'core']) => {
    rmSync(join(root, 'node_modules'), { recursive: true, force: true });
    for (const name of names) writeJson(`node_modules/@nestjs/${name}/package.json`, { name, version });
  };
  const run = (nestMajor: string | undefined, ...args: string[]) => {
    const env = { ...process.env };
    if (nestMajor === undefined) delete env.NEST_MAJOR;
    else env.NEST_MAJOR = nestMajor;
    const result = spawnSync(process.execPath, ['scripts/use-nest-major.mjs', ...args], {
      cwd: root,
      env,
      encoding: 'utf8',
    });
    return { code: result.status, out: result.stdout.trim(), err: result.stderr.trim() };
  };

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'nest-major-'));
    writeJson('package.json', {
      devDependencies: { '@nestjs/common': '^12.5.1', '@nestjs/core': '^12.5.1', typescript: '~6.0' },
    });
    writeJson('scripts/nest-majors.json', {
      about: 'test',
      '11': { '@nestjs/common': '^11.0.0', '@nestjs/core': '^11.0.0' },
    });
    copyFileSync(resolve('scripts/use-nest-major.mjs'), join(root, 'scripts', 'use-nest-major.mjs'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('unset, or the locked major: the locked packages, named with their versions', () => {
    installNest('12.5.1');
    expect(run(undefined, '--check')).toEqual({
      code: 0,
      out: 'NestJS 12 (NEST_MAJOR unset: as locked): @nestjs/common 12.5.1, @nestjs/core 12.5.1',
      err: '',
    });
    expect(run('12', '--check').out).toBe(
      'NestJS 12 (NEST_MAJOR=12, as locked): @nestjs/common 12.5.1, @nestjs/core 12.5.1',
    );
  });

  it('another major asked while the locked one is installed: --check fails and says how to install it', () => {
    installNest('12.5.1');
    const result = run('11', '--check');
    expect(result.code).toBe(1);
    expect(result.err).toBe(
      'NestJS 11 (NEST_MAJOR=11), but node_modules/ has @nestjs/common 12.5.1, @nestjs/core 12.5.1: ' +
        'run `node scripts/use-nest-major.mjs` to install them',
    );
  });

  it('that major installed: both commands pass without installing anything; the locked major is then refused', () => {
    installNest('11.2.10');
    expect(run('11', '--check')).toMatchObject({
      code: 0,
      out: expect.stringMatching(/^NestJS 11 \(NEST_MAJOR=11\): /),
    });
    const install = run('11');
    expect(install.code).toBe(0);
    expect(install.out).not.toContain('npm install');
    const locked = run(undefined, '--check');
    expect(locked.code).toBe(1);
    expect(locked.err).toContain('run `npm ci` for the locked packages');
  });

  it('a package missing counts as the wrong major', () => {
    installNest('11.2.10', ['core']);
    expect(run('11', '--check').err).toContain('@nestjs/common (missing)');
  });

  it('a major this repository does not test is refused with the ones it does (exit 2)', () => {
    const result = run('10', '--check');
    expect(result.code).toBe(2);
    expect(result.err).toContain('the suite runs on NestJS 12 or 11');
  });

  it("the repository's other majors name the same NestJS packages as its devDependencies", () => {
    const read = (path: string) => JSON.parse(readFileSync(path, 'utf8'));
    const locked = Object.keys(read('package.json').devDependencies).filter((name) => name.startsWith('@nestjs/'));
    const majors = read('scripts/nest-majors.json');
    const others = Object.keys(majors).filter((key) => /^\d+$/.test(key));
    expect(others).toEqual(['11']);
    for (const major of others) expect(Object.keys(majors[major]).sort()).toEqual(locked.sort());
  });
});
