import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';

/**
 * The docs name tests and source files as evidence ("attacked by `writes-in-doubt.spec`"): a rename that leaves a
 * citation behind makes a guarantee cite nothing. Every repository path in backticks, and every spec named by its
 * file name alone, must exist. CHANGELOG.md is history and is left out: it may name files as they were then.
 */
/** Jest runs from the repository root (as `test/unit/model/library-version.spec.ts` relies on too). */
const ROOT = process.cwd();
const PAGES = ['README.md', 'ARCHITECTURE.md', 'CONTRIBUTING.md', 'SECURITY.md', ...markdownUnder('docs')];
/** Paths in the reader's own app (docs/testing.md's Jest setup for a NestJS project), not in this repository. */
const READERS_APP = new Set(['test/jest-e2e.json']);
const REPOSITORY_PATH = /^(?:lib|test|scripts|docs|sample|\.ci)\/[^\s`*]*$/;
const SPEC_NAME = /^[\w.-]+\.spec(?:\.ts)?$/;

function markdownUnder(dir: string): string[] {
  const at = join(ROOT, dir);
  if (!existsSync(at)) return [];
  return readdirSync(at, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.md'))
    .map((name) => join(dir, name));
}

function filesUnder(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' }).map((name) => join(dir, name));
}

/** The backticked spans of a page, each with its line number. */
function citations(page: string): { token: string; line: number }[] {
  const found: { token: string; line: number }[] = [];
  readFileSync(join(ROOT, page), 'utf8')
    .split('\n')
    .forEach((text, index) => {
      for (const match of text.matchAll(/`([^`\n]+)`/g)) found.push({ token: match[1].trim(), line: index + 1 });
    });
  return found;
}

describe('paths cited in the docs', () => {
  const specNames = new Set(
    filesUnder('test')
      .filter((path) => !path.includes('node_modules') && path.endsWith('.spec.ts'))
      .flatMap((path) => {
        const name = path.slice(path.lastIndexOf('/') + 1);
        return [name, name.replace(/\.ts$/, '')];
      }),
  );

  it.each(PAGES.filter((page) => existsSync(join(ROOT, page))))('%s cites only files that exist', (page) => {
    const missing = citations(page)
      .filter(({ token }) => {
        if (REPOSITORY_PATH.test(token)) return !READERS_APP.has(token) && !existsSync(join(ROOT, token));
        if (SPEC_NAME.test(token)) return !specNames.has(token);
        return false;
      })
      .map(({ token, line }) => `${page}:${line} ${token}`);
    expect(missing).toEqual([]);
  });

  it('recognises both kinds of citation (a check that finds nothing to check proves nothing)', () => {
    const cited = PAGES.filter((page) => existsSync(join(ROOT, page))).flatMap((page) =>
      citations(page).map(({ token }) => token),
    );
    expect(cited.filter((token) => REPOSITORY_PATH.test(token)).length).toBeGreaterThan(20);
    expect(cited.filter((token) => SPEC_NAME.test(token)).length).toBeGreaterThan(5);
    expect(citations('docs/guarantees.md').filter(({ token }) => SPEC_NAME.test(token)).length).toBeGreaterThan(5);
    expect(specNames.has('writes-in-doubt.spec')).toBe(true);
  });
});
