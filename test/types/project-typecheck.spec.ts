import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from '@jest/globals';

/**
 * ts-jest only transpiles (tsconfig.json sets `isolatedModules`, which puts ts-jest in its per-file transpile mode),
 * so a type error in a test or in lib/ would not fail the file that has it. This file fails instead: the compiler
 * over the whole project (lib/, test/, sample/), as `npm run typecheck` runs it. Incremental, with its state in the
 * git-ignored .cache/, so a rerun only checks what changed.
 */
describe('the project type-checks (tsc -p tsconfig.json --noEmit)', () => {
  it('reports no type error in lib/, test/ or sample/', () => {
    const tsc = resolve('node_modules', 'typescript', 'bin', 'tsc');
    const args = ['-p', 'tsconfig.json', '--noEmit', '--incremental'];
    let output: string;
    try {
      output = execFileSync(
        process.execPath,
        [tsc, ...args, '--tsBuildInfoFile', resolve('.cache', 'typecheck.tsbuildinfo')],
        { encoding: 'utf8' },
      );
    } catch (error) {
      output = (error as { stdout?: string }).stdout || String(error);
    }
    expect(output).toBe('');
  }, 300_000);
});
