import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

/**
 * The import rules of lib/ (.dependency-cruiser.cjs: no file cycle, no folder cycle, no arrow to a higher floor), run
 * by scripts/check-imports.mjs (dependency-cruiser, with the violations known when the check came in ignored). It
 * runs in child processes, as `npm run lint:imports` does (dependency-cruiser is an ES module that loads TypeScript,
 * which jest's module registry would load again for nothing), all three at once to keep the file a few seconds.
 */
describe('import rules (dependency-cruiser)', () => {
  const CHECK = resolve('scripts/check-imports.mjs');
  const KNOWN_VIOLATIONS = '.dependency-cruiser-known-violations.json';

  type Report = { ok: boolean; newViolations: string[]; fixedButListed: string[]; modulesCruised: number };
  type Outcome = { report: Report; text: string; code: number };

  /** Runs the check in `cwd` (a repository root or a copy of one); its report, its text output and its exit code. */
  function check(cwd: string): Promise<Outcome> {
    return new Promise((done, fail) => {
      execFile(process.execPath, [CHECK, '--json'], { cwd, encoding: 'utf8' }, (error, stdout, stderr) => {
        const code = error ? Number((error as { code?: unknown }).code) : 0;
        try {
          done({ report: JSON.parse(stdout) as Report, text: stderr, code });
        } catch {
          fail(new Error(`the check printed no report (exit code ${code}):\n${stderr}`));
        }
      });
    });
  }

  function write(root: string, path: string, text: string): void {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }

  let scratch: string;
  let ofLib: Outcome;
  let ofBrokenCopy: Outcome;
  let ofFolderFixture: Outcome;

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'import-rules-'));
    // A copy of the repository's lib/ and rules with new violations, and one fixed that is still listed.
    const copy = join(scratch, 'copy');
    for (const file of ['lib', 'tsconfig.json', '.dependency-cruiser.cjs', KNOWN_VIOLATIONS]) {
      cpSync(file, join(copy, file), { recursive: true });
    }
    symlinkSync(resolve('node_modules'), join(copy, 'node_modules'), 'dir');
    // An arrow from the bottom floor (model) to the top one (the dashboard entry point); it also closes a folder
    // cycle, since the dashboard imports lib/model.
    write(copy, 'lib/model/upward.ts', "export { JobsDashboardModule } from '../dashboard/index.js';\n");
    // A file cycle inside one folder: no folder arrow, no floor arrow, only the cycle.
    write(copy, 'lib/http/cycle-a.ts', "import { b } from './cycle-b.js';\nexport const a = () => b;\n");
    write(copy, 'lib/http/cycle-b.ts', "import { a } from './cycle-a.js';\nexport const b = () => a;\n");
    // An arrow from a subfolder up to its parent folder, whose own files import the subfolder: a folder cycle that
    // dependency-cruiser's folder graph does not show (it counts lib/model/errors/ as part of lib/model/).
    write(copy, 'lib/model/errors/up.ts', "export { addMs } from '../clock.js';\n");
    // A folder that is on no floor.
    write(copy, 'lib/annex/annex.ts', "export { now } from '../model/clock.js';\n");
    // A listed violation that does not occur (as if it had been fixed and left in the list).
    const known = JSON.parse(readFileSync(KNOWN_VIOLATIONS, 'utf8')) as unknown[];
    const gone = {
      type: 'dependency',
      from: 'lib/model/clock.ts',
      to: 'lib/lease/lease.ts',
      rule: { severity: 'error', name: 'no-upward-from-model' },
    };
    writeFileSync(join(copy, KNOWN_VIOLATIONS), JSON.stringify([...known, gone], null, 2));

    // Five folders whose arrow a → d is on a cycle (a → d → e → b → a) that dependency-cruiser 17's own cycle search
    // does not find: from d it goes to c first, meets d again through c → d, rejects that way back, and has by then
    // spent e and b, the folders the real way back needs.
    const fixture = join(scratch, 'folders');
    const arrows = { a: ['d'], b: ['a'], c: ['d'], d: ['c', 'e'], e: ['b'] };
    for (const [from, targets] of Object.entries(arrows)) {
      const imports = targets.map((to) => `import { ${to} } from '../${to}/${to}.js';\n`).join('');
      write(fixture, `lib/${from}/${from}.ts`, `${imports}export const ${from} = () => [${targets.join(', ')}];\n`);
    }
    write(
      fixture,
      'tsconfig.json',
      JSON.stringify({ compilerOptions: { module: 'esnext', moduleResolution: 'bundler' } }),
    );
    write(
      fixture,
      '.dependency-cruiser.cjs',
      `module.exports = ${JSON.stringify({
        forbidden: [{ name: 'no-folder-cycle', severity: 'error', scope: 'folder', from: {}, to: { circular: true } }],
        options: { tsPreCompilationDeps: true, tsConfig: { fileName: 'tsconfig.json' } },
      })};\n`,
    );

    [ofLib, ofBrokenCopy, ofFolderFixture] = await Promise.all([check(process.cwd()), check(copy), check(fixture)]);
  }, 60_000);

  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('lib/ breaks no rule beyond the known violations, and every known violation still occurs', () => {
    const { report, text, code } = ofLib;
    // The whole of lib/ was cruised (an unresolved import or a wrong path would make the rules see nothing).
    expect(report.modulesCruised).toBeGreaterThan(150);
    expect({ newViolations: report.newViolations, fixedButListed: report.fixedButListed }).toEqual({
      newViolations: [],
      fixedButListed: [],
    });
    expect({ code, text }).toEqual({ code: 0, text: expect.stringContaining('Import rules hold') });
  });

  it('a copy of lib/ with new violations fails, naming each one; a listed violation that is gone fails too', () => {
    const { report, text, code } = ofBrokenCopy;
    expect(code).toBe(1);
    expect(report.ok).toBe(false);
    const notFolderCycles = report.newViolations.filter((line) => !line.startsWith('no-folder-cycle:'));
    // A cycle is one violation, reported from one of its edges.
    expect(notFolderCycles.map((line) => line.replace(/ \(cycle: .*\)$/, '')).sort()).toEqual([
      'no-circular: lib/http/cycle-a.ts → lib/http/cycle-b.ts',
      'no-upward-from-model: lib/model/upward.ts → lib/dashboard/index.ts',
      'not-on-a-floor: lib/annex/annex.ts → lib/model/clock.ts',
    ]);
    expect(report.newViolations).toContainEqual(
      'no-folder-cycle: lib/model → lib/dashboard (cycle: lib/model → lib/dashboard → lib/model)',
    );
    expect(report.newViolations).toContainEqual(
      'no-folder-cycle: lib/model → lib/model/errors (cycle: lib/model → lib/model/errors → lib/model)',
    );
    expect(report.fixedButListed).toEqual(['no-upward-from-model: lib/model/clock.ts → lib/lease/lease.ts']);
    // The text output names them for whoever runs `npm run lint:imports`.
    expect(text).toContain('no-upward-from-model: lib/model/upward.ts → lib/dashboard/index.ts');
    expect(text).toContain('no longer occur');
    expect(text).toContain('Import rules broken');
  });

  it('every folder arrow on a cycle is reported, those that dependency-cruiser misses included', () => {
    const { report, code } = ofFolderFixture;
    expect(code).toBe(1);
    expect([...report.newViolations].sort()).toEqual([
      'no-folder-cycle: lib/a → lib/d (cycle: lib/a → lib/d → lib/e → lib/b → lib/a)',
      'no-folder-cycle: lib/b → lib/a (cycle: lib/b → lib/a → lib/d → lib/e → lib/b)',
      'no-folder-cycle: lib/c → lib/d (cycle: lib/c → lib/d → lib/c)',
      'no-folder-cycle: lib/d → lib/c (cycle: lib/d → lib/c → lib/d)',
      'no-folder-cycle: lib/d → lib/e (cycle: lib/d → lib/e → lib/b → lib/a → lib/d)',
      'no-folder-cycle: lib/e → lib/b (cycle: lib/e → lib/b → lib/a → lib/d → lib/e)',
    ]);
  });
});
