import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from '@jest/globals';

/**
 * The typed job catalogue is checked by the compiler, so its tests are compilations: each fixture under
 * test/types/fixtures is an app importing 'nestjs-mongo-jobs' as users do (the package's own name, resolved through
 * package.json "exports" to the built dist/; `npm test` builds first). A fixture passes when tsc reports nothing:
 * plain lines compile, and every `@ts-expect-error` line is rejected (an accepted one is reported as unused).
 */
describe('typed job catalogue (tsc --noEmit over fixtures)', () => {
  const tsc = resolve('node_modules', 'typescript', 'bin', 'tsc');

  const compile = (fixture: string): string => {
    try {
      return execFileSync(process.execPath, [tsc, '-p', resolve('test/types/fixtures', fixture, 'tsconfig.json')], {
        encoding: 'utf8',
      });
    } catch (error) {
      return (error as { stdout?: string }).stdout || String(error);
    }
  };

  it.each([
    ['catalogue', 'an app declaring JobPayloads and JobResults: names, payloads and results are checked'],
    ['no-catalogue', 'an app declaring nothing: everything is unknown-typed and compiles as before'],
  ])(
    '%s — %s',
    (fixture) => {
      expect(compile(fixture)).toBe('');
    },
    60_000,
  );
});
