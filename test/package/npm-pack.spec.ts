import { execFileSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

/**
 * What `npm pack` ships from a clean clone (no dist/ yet): a copy of the working tree's tracked and
 * unignored files, with node_modules linked, packed once; the tarball is unpacked into a consumer app.
 */
describe('npm pack from a clean clone', () => {
  const repo = resolve('.');
  let work: string;
  let packed: string[];
  let installed: string;

  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'jobs-pack-'));
    symlinkSync(join(repo, 'node_modules'), join(work, 'node_modules'), 'dir');
    const clone = join(work, 'clone');
    const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
      cwd: repo,
      encoding: 'utf8',
    })
      .split('\0')
      // A node_modules that is a symlink (a git worktree sharing another's) is a file to git, which `node_modules/`
      // does not ignore; it is linked below, never copied.
      .filter((file) => file && file !== 'node_modules' && existsSync(join(repo, file)));
    for (const file of files) {
      mkdirSync(dirname(join(clone, file)), { recursive: true });
      cpSync(join(repo, file), join(clone, file));
    }
    symlinkSync(join(repo, 'node_modules'), join(clone, 'node_modules'), 'dir');

    const out = execFileSync('npm', ['pack', '--json', '--pack-destination', work], {
      cwd: clone,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const [report] = JSON.parse(out.slice(out.indexOf('[\n'))) as { filename: string; files: { path: string }[] }[];
    packed = report.files.map((f) => f.path);

    // The consumer app: node_modules/nestjs-mongo-jobs is the unpacked tarball; its peers resolve
    // upwards through work/node_modules.
    const consumer = join(work, 'consumer');
    mkdirSync(join(consumer, 'node_modules'), { recursive: true });
    execFileSync('tar', ['-xzf', join(work, report.filename), '-C', join(consumer, 'node_modules')]);
    installed = join(consumer, 'node_modules', 'nestjs-mongo-jobs');
    renameSync(join(consumer, 'node_modules', 'package'), installed);
  }, 180_000);

  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('contains both builds (the prepare script builds dist/ and dist/esm/) and the dashboard page', () => {
    expect(packed).toEqual(
      expect.arrayContaining([
        'dist/index.js',
        'dist/index.d.ts',
        'dist/health/index.js',
        'dist/dashboard/index.js',
        'dist/testing/index.js',
        'dist/esm/package.json',
        'dist/esm/index.js',
        'dist/esm/index.d.ts',
        'dist/esm/health/index.js',
        'dist/esm/dashboard/index.js',
        'dist/esm/dashboard/dashboard-directory.cjs',
        'dist/esm/testing/index.js',
        'lib/dashboard/page/index.html',
        'lib/dashboard/page/dashboard.js',
        'lib/dashboard/page/dashboard.css',
      ]),
    );
    expect(JSON.parse(readFileSync(join(installed, 'dist/esm/package.json'), 'utf8'))).toEqual({ type: 'module' });
  });

  it('ships the README, not docs/ (the pages are read in the repository, where the README links them)', () => {
    expect(packed).toContain('README.md');
    expect(packed.filter((file) => file.startsWith('docs/') || /^[^/]+\.md$/.test(file))).toEqual(['README.md']);
  });

  it('ships every file the exports map names', () => {
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as { exports: unknown };
    const targets = (value: unknown): string[] =>
      typeof value === 'string' ? [value] : Object.values(value as Record<string, unknown>).flatMap(targets);
    const named = targets(manifest.exports).map((target) => target.replace(/^\.\//, ''));
    expect(named.length).toBeGreaterThanOrEqual(17);
    expect(named.filter((file) => !packed.includes(file))).toEqual([]);
  });

  // An import attribute in a declaration (`import("@nestjs/common", { with: { "resolution-mode": "import" } })`, what
  // TypeScript writes for an inferred type from an ES-module-only package) needs TypeScript 5.3 in every consumer.
  it('ships declarations with plain imports only', () => {
    const declarations = packed.filter((file) => /\.d\.c?ts$/.test(file));
    expect(declarations.length).toBeGreaterThan(100);
    const withAttributes = declarations.filter((file) =>
      readFileSync(join(installed, file), 'utf8').includes('resolution-mode'),
    );
    expect(withAttributes).toEqual([]);
  });

  it('ships source maps whose sources are all in the pack', () => {
    const maps = packed.filter((file) => file.endsWith('.map'));
    expect(maps).toEqual(expect.arrayContaining(['dist/index.js.map', 'dist/index.d.ts.map']));
    const unresolved = maps.flatMap((map) => {
      const { sources } = JSON.parse(readFileSync(join(installed, map), 'utf8')) as { sources: string[] };
      return sources
        .map((source) => relative(installed, resolve(installed, dirname(map), source)))
        .filter((source) => !packed.includes(source))
        .map((source) => `${map} -> ${source}`);
    });
    expect(unresolved).toEqual([]);
  });

  // Every subpath in "exports" (but ./package.json) must typecheck for a TypeScript consumer on each resolution mode.
  it.each([
    { resolution: 'node10', module: 'commonjs', type: 'commonjs' },
    { resolution: 'node16', module: 'node16', type: 'commonjs' },
    { resolution: 'node16', module: 'node16', type: 'module' },
    { resolution: 'bundler', module: 'esnext', type: 'module' },
  ])(
    'typechecks a $type app importing every subpath on moduleResolution $resolution',
    ({ resolution, module, type }) => {
      const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
        exports: Record<string, unknown>;
      };
      const subpaths = Object.keys(manifest.exports).filter((key) => key !== './package.json');
      expect(subpaths).toEqual(expect.arrayContaining(['.', './health', './dashboard', './testing']));

      const app = join(work, 'consumer', resolution);
      mkdirSync(app, { recursive: true });
      writeFileSync(join(app, 'package.json'), JSON.stringify({ name: `consumer-${resolution}`, type }));
      const imports = subpaths.map((subpath, i) => {
        const specifier = join('nestjs-mongo-jobs', subpath);
        return `import * as m${i} from '${specifier}';\nexport const k${i}: string[] = Object.keys(m${i});`;
      });
      // A named export from each entry proves the declarations (not an implicit any) were found.
      imports.push(
        "import { JobsService } from 'nestjs-mongo-jobs';\nexport type S = JobsService['enqueue'];",
        "import { JobsHealthIndicator } from 'nestjs-mongo-jobs/health';\nexport type H = JobsHealthIndicator;",
        "import type { JobsDashboardOptions } from 'nestjs-mongo-jobs/dashboard';\nexport type D = JobsDashboardOptions['guard'];",
        "import { createTestJobContext } from 'nestjs-mongo-jobs/testing';\nexport const T: string[] = createTestJobContext().extendLockTimeCalls.map(String);",
      );
      writeFileSync(join(app, 'index.ts'), `${imports.join('\n')}\n`);
      writeFileSync(
        join(app, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            target: 'ES2022',
            module,
            moduleResolution: resolution,
            ignoreDeprecations: '6.0',
            strict: true,
            noEmit: true,
            skipLibCheck: true,
            experimentalDecorators: true,
            types: [],
          },
          files: ['index.ts'],
        }),
      );
      const tsc = join(repo, 'node_modules', 'typescript', 'bin', 'tsc');
      const result = (() => {
        try {
          return execFileSync(process.execPath, [tsc, '-p', join(app, 'tsconfig.json')], { encoding: 'utf8' });
        } catch (error) {
          return (error as { stdout?: string }).stdout ?? String(error);
        }
      })();
      expect(result).toBe('');
    },
    60_000,
  );
});
