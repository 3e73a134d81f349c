import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from '@jest/globals';

/**
 * The import rules of lib/ (.dependency-cruiser.cjs: no file cycle, no folder cycle, no arrow to a higher floor), run
 * by scripts/check-imports.mjs (dependency-cruiser, with the violations known when the check came in ignored). It
 * runs in a child process, as `npm run lint:imports` does: dependency-cruiser is an ES module that loads TypeScript,
 * which jest's module registry would load again for nothing.
 */
describe('import rules (dependency-cruiser)', () => {
  const CHECK = resolve('scripts/check-imports.mjs');
  const KNOWN_VIOLATIONS = '.dependency-cruiser-known-violations.json';

  type Report = { ok: boolean; newViolations: string[]; fixedButListed: string[]; modulesCruised: number };

  /** Runs the check in `cwd` (a repository root or a copy of one); its report, its text output and its exit code. */
  function check(cwd: string): Promise<{ report: Report; text: string; code: number }> {
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

  it('lib/ breaks no rule beyond the known violations, and every known violation still occurs', async () => {
    const { report, text, code } = await check(process.cwd());
    // The whole of lib/ was cruised (an unresolved import or a wrong path would make the rules see nothing).
    expect(report.modulesCruised).toBeGreaterThan(150);
    expect({ newViolations: report.newViolations, fixedButListed: report.fixedButListed }).toEqual({
      newViolations: [],
      fixedButListed: [],
    });
    expect({ code, text }).toEqual({ code: 0, text: expect.stringContaining('Import rules hold') });
  }, 30_000);

  it('a copy of lib/ with new violations fails, naming each one; a listed violation that is gone fails too', async () => {
    const copy = mkdtempSync(join(tmpdir(), 'import-rules-'));
    try {
      for (const file of ['lib', 'tsconfig.json', '.dependency-cruiser.cjs', KNOWN_VIOLATIONS]) {
        cpSync(file, join(copy, file), { recursive: true });
      }
      symlinkSync(resolve('node_modules'), join(copy, 'node_modules'), 'dir');
      const write = (path: string, text: string) => {
        mkdirSync(join(copy, path, '..'), { recursive: true });
        writeFileSync(join(copy, path), text);
      };
      // An arrow from the bottom floor (model) to the top one (the dashboard entry point); it also closes a
      // folder cycle, since the dashboard imports lib/utils.
      write('lib/utils/upward.ts', "export { JobsDashboardModule } from '../dashboard/index.js';\n");
      // A file cycle inside one folder: no folder arrow, no floor arrow, only the cycle.
      write('lib/http/cycle-a.ts', "import { b } from './cycle-b.js';\nexport const a = () => b;\n");
      write('lib/http/cycle-b.ts', "import { a } from './cycle-a.js';\nexport const b = () => a;\n");
      // A folder that is on no floor.
      write('lib/annex/annex.ts', "export { now } from '../utils/clock.js';\n");
      // A listed violation that does not occur (as if it had been fixed and left in the list).
      const known = JSON.parse(readFileSync(KNOWN_VIOLATIONS, 'utf8')) as unknown[];
      const gone = {
        type: 'dependency',
        from: 'lib/utils/clock.ts',
        to: 'lib/lease/lease.ts',
        rule: { severity: 'error', name: 'no-upward-from-model' },
      };
      writeFileSync(join(copy, KNOWN_VIOLATIONS), JSON.stringify([...known, gone], null, 2));

      const { report, text, code } = await check(copy);

      expect(code).toBe(1);
      expect(report.ok).toBe(false);
      const notFolderCycles = report.newViolations.filter((line) => !line.startsWith('no-folder-cycle:'));
      // A cycle is one violation, reported from one of its edges.
      expect(notFolderCycles.map((line) => line.replace(/ \(cycle: .*\)$/, '')).sort()).toEqual([
        'no-circular: lib/http/cycle-a.ts → lib/http/cycle-b.ts',
        'no-upward-from-model: lib/utils/upward.ts → lib/dashboard/index.ts',
        'not-on-a-floor: lib/annex/annex.ts → lib/utils/clock.ts',
      ]);
      expect(report.newViolations).toContainEqual(
        expect.stringMatching(/^no-folder-cycle: lib\/utils → lib\/dashboard /),
      );
      expect(report.fixedButListed).toEqual(['no-upward-from-model: lib/utils/clock.ts → lib/lease/lease.ts']);
      // The text output names them for whoever runs `npm run lint:imports`.
      expect(text).toContain('no-upward-from-model: lib/utils/upward.ts → lib/dashboard/index.ts');
      expect(text).toContain('no longer occur');
      expect(text).toContain('Import rules broken');
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  }, 30_000);
});
