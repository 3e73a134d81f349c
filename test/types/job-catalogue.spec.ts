import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from '@jest/globals';

/**
 * The typed job catalogue is checked by the compiler, so its tests are compilations: each fixture under
 * test/types/fixtures is an app importing 'nestjs-mongo-jobs' as users do (the package's own name, resolved through
 * package.json "exports" to the built dist/; `npm test` builds first). A fixture passes when tsc reports nothing:
 * plain lines compile, and every `@ts-expect-error` line is rejected (an accepted one is reported as unused).
 */
describe('typed job catalogue (tsc --noEmit over fixtures)', () => {
  const tsc = resolve('node_modules', 'typescript', 'bin', 'tsc');

  const compile = (tsconfig: string): string => {
    try {
      return execFileSync(process.execPath, [tsc, '-p', tsconfig], { encoding: 'utf8' });
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
      expect(compile(resolve('test/types/fixtures', fixture, 'tsconfig.json'))).toBe('');
    },
    60_000,
  );

  it("the docs' example (docs/enqueueing.md) compiles, its @ts-expect-error lines included", () => {
    const section = readFileSync('docs/enqueueing.md', 'utf8').split(/^## Typed job catalogue$/m)[1] ?? '';
    const example = /```ts\n([\s\S]*?)```/.exec(section.split(/^## /m)[0])?.[1];
    expect(example).toContain("declare module 'nestjs-mongo-jobs'");
    // Inside the package (git-ignored .cache/), so 'nestjs-mongo-jobs' resolves to it as in the fixtures.
    const dir = resolve('.cache', 'types-readme');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'readme-example.ts'), example as string);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        extends: resolve('test/types/fixtures/tsconfig.base.json'),
        files: ['readme-example.ts'],
      }),
    );
    expect(compile(join(dir, 'tsconfig.json'))).toBe('');
  }, 60_000);
});
