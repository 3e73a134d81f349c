// Code blocks of a docs page (README.md, docs/*.md) that name a file on their first line (`// src/reports.ts`,
// `// package.json`), found by that path and the heading they sit under: the consumer apps of
// scripts/check-consumers.mjs are built from them (docs/testing.md's), so the docs and what CI runs cannot drift apart.

/**
 * Every fenced block whose first line is `// <path>` (anything after the path is a note): `{ heading, file, lang,
 * code }`, `code` being the block without that first line. `page` only names the page in errors.
 */
export function readmeSnippets(readme, page = 'README.md') {
  const snippets = [];
  const lines = readme.split('\n');
  let heading = '';
  for (let index = 0; index < lines.length; index += 1) {
    const title = /^#{1,6} (.+)$/.exec(lines[index]);
    if (title) {
      heading = title[1].trim();
      continue;
    }
    const fence = /^```(\S*)\s*$/.exec(lines[index]);
    if (!fence) continue;
    const end = lines.indexOf('```', index + 1);
    if (end === -1) throw new Error(`${page}: the code block at line ${index + 1} is never closed`);
    const body = lines.slice(index + 1, end);
    const path = /^\/\/ (\S+)/.exec(body[0] ?? '');
    if (path) snippets.push({ heading, file: path[1], lang: fence[1], code: `${body.slice(1).join('\n')}\n` });
    index = end;
  }
  return snippets;
}

/** The one snippet for `file` under the heading `heading`; throws when there is none, or more than one. */
export function findSnippet(snippets, heading, file, page = 'README.md') {
  const found = snippets.filter((snippet) => snippet.heading === heading && snippet.file === file);
  if (found.length !== 1) {
    const near = snippets
      .filter((snippet) => snippet.file === file)
      .map((snippet) => `"${snippet.heading}"`)
      .join(', ');
    throw new Error(
      `${page} has ${found.length} blocks "// ${file}" under the heading "${heading}" (need exactly one)` +
        (near ? `; "// ${file}" blocks sit under: ${near}` : ''),
    );
  }
  return found[0];
}

const isPlainObject = (value) => typeof value === 'object' && value !== null && !Array.isArray(value);

/** `base` with `patch` merged in: objects key by key, anything else replaced (what "add this to package.json" means). */
export function mergeJson(base, patch) {
  const merged = { ...base };
  for (const [key, value] of Object.entries(patch)) {
    merged[key] = isPlainObject(value) && isPlainObject(base[key]) ? mergeJson(base[key], value) : value;
  }
  return merged;
}
