import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from '@jest/globals';

/**
 * Every relative link of the docs leads somewhere: the file (or folder) exists, and an `#anchor` names a heading of
 * the page it points to, by GitHub's slug rules. Links with a scheme (https:, mailto:) are not followed.
 */
const ROOT = process.cwd();
const PAGES = [
  'README.md',
  'ARCHITECTURE.md',
  'CONTRIBUTING.md',
  'SECURITY.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

/** The page's lines outside fenced code blocks (a link in a code block is code, not a link). */
function proseLines(text: string): { line: string; number: number }[] {
  const lines: { line: string; number: number }[] = [];
  let fence: string | undefined;
  text.split('\n').forEach((line, index) => {
    const marker = /^\s*(```+|~~~+)/.exec(line)?.[1];
    if (marker && (fence === undefined || marker.startsWith(fence))) {
      fence = fence === undefined ? marker : undefined;
      return;
    }
    if (fence === undefined) lines.push({ line, number: index + 1 });
  });
  return lines;
}

/** GitHub's heading anchor: lowercased, punctuation dropped (letters, digits, `_` and `-` kept), spaces as `-`. */
function githubSlug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link's text only
    .replace(/<[^>]+>/g, '') // inline HTML
    .replace(/[`*]/g, '') // code spans and emphasis
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor of a page: its headings' slugs, a repeated slug numbered `-1`, `-2`… as GitHub does. */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const { line } of proseLines(text)) {
    const heading = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = githubSlug(heading);
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** The link targets of a page: inline links and images `[text](target)`, and reference definitions `[x]: target`. */
function linksOf(page: string): { target: string; line: number }[] {
  const links: { target: string; line: number }[] = [];
  for (const { line, number } of proseLines(readFileSync(join(ROOT, page), 'utf8'))) {
    const prose = line.replace(/`[^`]*`/g, ''); // code spans hold no links
    for (const match of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      links.push({ target: match[1], line: number });
    }
    const definition = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(prose);
    if (definition) links.push({ target: definition[1], line: number });
  }
  return links;
}

const isExternal = (target: string) => /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//');

/** Why `target` (as written on `page`) does not resolve, or undefined when it does. */
function brokenBecause(page: string, target: string): string | undefined {
  const hash = target.indexOf('#');
  const path = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
  const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const file = path === '' ? join(ROOT, page) : join(ROOT, dirname(page), path);
  if (relative(ROOT, file).startsWith('..')) return 'points outside the repository';
  if (!existsSync(file)) return 'no such file';
  if (anchor === undefined) return undefined;
  if (statSync(file).isDirectory() || !file.endsWith('.md')) return 'an anchor on a file that is not a Markdown page';
  return anchorsOf(readFileSync(file, 'utf8')).has(anchor) ? undefined : 'no heading has this anchor';
}

describe('links in the docs', () => {
  it.each(PAGES.filter((page) => existsSync(join(ROOT, page))))(
    '%s: every relative link and anchor resolves',
    (page) => {
      const broken = linksOf(page)
        .filter(({ target }) => !isExternal(target))
        .map(({ target, line }) => ({ target, line, why: brokenBecause(page, target) }))
        .filter(({ why }) => why !== undefined)
        .map(({ target, line, why }) => `${page}:${line} ${target}: ${why}`);
      expect(broken).toEqual([]);
    },
  );

  it('checks what it should (a check that finds nothing to check proves nothing)', () => {
    const relativeLinks = PAGES.flatMap((page) => linksOf(page).filter(({ target }) => !isExternal(target)));
    expect(relativeLinks.length).toBeGreaterThan(60);
    expect(relativeLinks.filter(({ target }) => target.includes('#')).length).toBeGreaterThan(20);
    // The README links every page of docs/.
    const fromReadme = new Set(linksOf('README.md').map(({ target }) => target.replace(/#.*$/, '')));
    const unlinked = PAGES.filter((page) => page.startsWith('docs/') && !fromReadme.has(page));
    expect(unlinked).toEqual([]);
  });

  it.each([
    ['HTTP errors: `JobsExceptionFilter`', 'http-errors-jobsexceptionfilter'],
    ['To per-name claims (`claim_by_name`)', 'to-per-name-claims-claim_by_name'],
    ['Coming from @nestjs/bullmq', 'coming-from-nestjsbullmq'],
    ['Enqueue inside a transaction (outbox)', 'enqueue-inside-a-transaction-outbox'],
    ['Fleet-wide limits → Protocol', 'fleet-wide-limits--protocol'],
    ['NestJS 12 with Jest (ES modules)', 'nestjs-12-with-jest-es-modules'],
  ])('slugs "%s" as GitHub does: #%s', (heading, slug) => {
    expect(githubSlug(heading)).toBe(slug);
  });

  it('numbers a repeated heading as GitHub does', () => {
    expect([...anchorsOf('# A\n\n## Setup\n\n```md\n## Setup\n```\n\n## Setup\n')]).toEqual(['a', 'setup', 'setup-1']);
  });
});
