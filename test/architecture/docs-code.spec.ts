import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, normalize, relative, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from '@jest/globals';

/**
 * Every ```ts block of the README and docs/ compiles against the package, as a user's app would import it: the
 * blocks are written under .cache/docs-code/ (inside the package, so 'nestjs-mongo-jobs' resolves to the built dist/
 * through package.json "exports", as in test/types; `npm test` builds first) and compiled by one `tsc` program.
 *
 * - A block whose first line names its file (`// src/reports.ts`) is that file of the reader's app: it is written to
 *   that path (one folder per page, so `import … from './app.module'` finds the page's other block) and compiles as
 *   written.
 * - Any other block is a fragment of an app: the names it uses from the package, Nest and mongoose without importing
 *   them (AUTO_IMPORTS below) are imported for it.
 * - The HTML comment right above a fence can add what a fragment assumes of the reader's app:
 *   `<!-- compile: declare const jobs: JobsService; -->` is put before the block, and a `{{block}}` in it places the
 *   block inside (`<!-- compile: class Handlers { {{block}} } -->` for methods shown alone). It is invisible on the
 *   rendered page.
 * - `<!-- not compiled: why -->` leaves a block out. Keep those rare (OPT_OUT_LIMIT) and say why.
 */
const ROOT = process.cwd();
const WORK = resolve('.cache', 'docs-code');
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];
const OPT_OUT_LIMIT = 4;

/** What a fragment may use without importing it: module → names (`type ` marks a type-only import). */
const AUTO_IMPORTS: Record<string, string[]> = {
  'nestjs-mongo-jobs': [
    'JobHandler',
    'JobsModule',
    'JobsService',
    'JobsExceptionFilter',
    'UnrecoverableJobError',
    'requireJob',
    'jobErrorStatus',
    'jobErrorMessage',
    'type JobExecutionContext',
    'type JobRecord',
    'type JobsOptionsFactory',
  ],
  'nestjs-mongo-jobs/dashboard': ['JobsDashboardModule'],
  '@nestjs/common': [
    'Injectable',
    'Module',
    'Controller',
    'Get',
    'Post',
    'Param',
    'HttpCode',
    'UseFilters',
    'UnauthorizedException',
    'type CanActivate',
    'type ExecutionContext',
  ],
  '@nestjs/core': ['NestFactory', 'Reflector', 'APP_FILTER'],
  '@nestjs/mongoose': ['MongooseModule'],
  '@nestjs/schedule': ['ScheduleModule'],
};

interface Block {
  page: string;
  /** Line of the opening fence, 1-based. */
  line: number;
  code: string;
  /** The path its first line names, if any. */
  file?: string;
  compile?: string;
  notCompiled?: string;
}

/** `<!-- compile: … -->` or `<!-- not compiled: … -->`, on one line or several, ending right above a fence. */
const MARKER = /^<!-- (compile|not compiled):\s+([\s\S]*?)\s*-->$/;

/** The marker whose last line is `lines[end]`, if there is one. */
function markerEndingAt(lines: string[], end: number): RegExpExecArray | null {
  if (!lines[end]?.endsWith('-->')) return null;
  let start = end;
  while (start > 0 && !lines[start].startsWith('<!--')) start -= 1;
  return MARKER.exec(lines.slice(start, end + 1).join('\n'));
}

function blocksOf(page: string): { blocks: Block[]; strayMarkers: number[] } {
  const lines = readFileSync(join(ROOT, page), 'utf8').split('\n');
  const blocks: Block[] = [];
  const strayMarkers: number[] = [];
  for (let index = 0; index < lines.length; index += 1) {
    if (markerEndingAt(lines, index) && !/^```(ts|typescript)\s*$/.test(lines[index + 1] ?? '')) {
      strayMarkers.push(index + 1);
    }
    const fence = /^```(\S*)/.exec(lines[index]);
    if (!fence) continue;
    const end = lines.indexOf('```', index + 1);
    if (end === -1) throw new Error(`${page}:${index + 1}: a code block that is never closed`);
    if (fence[1] === 'ts' || fence[1] === 'typescript') {
      const code = lines.slice(index + 1, end);
      const above = markerEndingAt(lines, index - 1);
      blocks.push({
        page,
        line: index + 1,
        code: code.join('\n'),
        file: /^\/\/ (\S+?\.[cm]?ts)(?::|\s|$)/.exec(code[0] ?? '')?.[1],
        compile: above?.[1] === 'compile' ? above[2] : undefined,
        notCompiled: above?.[1] === 'not compiled' ? above[2] : undefined,
      });
    }
    index = end;
  }
  return { blocks, strayMarkers };
}

/** Names a piece of code imports or declares itself (then it must not be imported for it). */
function ownNames(code: string): Set<string> {
  const names = new Set<string>();
  for (const match of code.matchAll(/^\s*import\s+(?:type\s+)?([\s\S]*?)\s+from\s+['"]/gm)) {
    for (const part of match[1].replace(/[{}]/g, ',').split(',')) {
      const name = part
        .trim()
        .replace(/^type\s+/, '')
        .split(/\s+as\s+|\s+/)
        .pop();
      if (name && name !== '*') names.add(name);
    }
  }
  for (const match of code.matchAll(/\b(?:class|const|let|var|function|interface|type|enum)\s+([A-Za-z_$][\w$]*)/g)) {
    names.add(match[1]);
  }
  return names;
}

/** The import lines for the AUTO_IMPORTS names `code` uses and does not import or declare itself. */
function autoImports(code: string): string[] {
  const own = ownNames(code);
  return Object.entries(AUTO_IMPORTS).flatMap(([module, entries]) => {
    const used = entries.filter((entry) => {
      const name = entry.replace(/^type /, '');
      return !own.has(name) && new RegExp(`(?<![\\w$.])${name.replace(/\$/g, '\\$')}(?![\\w$])`).test(code);
    });
    return used.length ? [`import { ${used.join(', ')} } from '${module}';`] : [];
  });
}

interface Generated {
  block: Block;
  path: string;
  /** For each line of the file written, the block's line it came from (1-based), or undefined for added code. */
  origin: (number | undefined)[];
}

function generate(blocks: Block[]): Generated[] {
  return blocks.map((block) => {
    const pageDir = join(WORK, block.page.replace(/\.md$/, '').replace(/[/.]/g, '_'));
    const path = block.file
      ? normalize(join(pageDir, block.file))
      : join(pageDir, 'fragments', `line-${block.line}.ts`);
    if (relative(pageDir, path).startsWith('..')) throw new Error(`${block.page}:${block.line}: ${block.file} escapes`);
    const [before, after = ''] = (block.compile ?? '').split('{{block}}');
    const code = block.code.split('\n');
    // Placed inside the marker's code, the block's own leading imports still go first in the file.
    let hoisted = 0;
    if (block.compile?.includes('{{block}}')) while (/^(import\s.*|\s*)$/.test(code[hoisted] ?? 'end')) hoisted += 1;
    const lines: [string, number | undefined][] = [];
    const add = (text: string) => {
      if (text.trim()) for (const line of text.trim().split('\n')) lines.push([line, undefined]);
    };
    const addBlock = (from: number, to: number) => {
      for (let index = from; index < to; index += 1) lines.push([code[index], index + 1]);
    };
    if (!block.file) for (const line of autoImports(`${before}\n${block.code}\n${after}`)) add(line);
    addBlock(0, hoisted);
    add(before);
    addBlock(hoisted, code.length);
    add(after);
    add('export {};');
    mkdirSync(dirname(path), { recursive: true });
    // flag 'wx': a second block naming the same file is an error.
    writeFileSync(path, `${lines.map(([line]) => line).join('\n')}\n`, { flag: 'wx' });
    return { block, path, origin: lines.map(([, from]) => from) };
  });
}

/** tsc's diagnostics, each placed at its page and line: `docs/x.md:42: TS2304 Cannot find name 'jobs'.` */
function compile(generated: Generated[], extraFiles: string[]): string[] {
  const tsconfig = join(WORK, 'tsconfig.json');
  writeFileSync(
    tsconfig,
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        lib: ['ES2022'],
        module: 'esnext',
        moduleResolution: 'bundler',
        types: ['node'],
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        experimentalDecorators: true,
        emitDecoratorMetadata: true,
      },
      files: [...generated.map(({ path }) => path), ...extraFiles],
    }),
  );
  const tsc = resolve('node_modules', 'typescript', 'bin', 'tsc');
  let output = '';
  try {
    output = execFileSync(process.execPath, [tsc, '-p', tsconfig, '--pretty', 'false'], { encoding: 'utf8' });
  } catch (error) {
    output = (error as { stdout?: string }).stdout || String(error);
  }
  const byPath = new Map(generated.map((entry) => [entry.path, entry]));
  const diagnostics: string[] = [];
  for (const line of output.split('\n')) {
    const match = /^(.+?)\((\d+),\d+\): error (TS\d+): (.*)$/.exec(line);
    if (!match) {
      if (line.trim() && diagnostics.length) diagnostics[diagnostics.length - 1] += ` ${line.trim()}`;
      else if (line.trim()) diagnostics.push(line.trim());
      continue;
    }
    const entry = byPath.get(resolve(WORK, match[1])) ?? byPath.get(resolve(match[1]));
    if (!entry) {
      diagnostics.push(`${relative(WORK, resolve(match[1]))}:${match[2]}: ${match[3]} ${match[4]}`);
      continue;
    }
    const inBlock = entry.origin[Number(match[2]) - 1];
    const where =
      inBlock === undefined
        ? `${entry.block.page}:${entry.block.line} (in the code added to it)`
        : `${entry.block.page}:${entry.block.line + inBlock}`;
    diagnostics.push(`${where}: ${match[3]} ${match[4]}`);
  }
  return diagnostics;
}

describe('TypeScript in the docs (one tsc program over every block)', () => {
  const all = PAGES.map((page) => ({ page, ...blocksOf(page) }));
  const blocks = all.flatMap(({ blocks }) => blocks);
  const compiled = blocks.filter((block) => block.notCompiled === undefined);
  let diagnostics: string[] = [];
  /** A block that must fail, in the same program: proves that errors are reported and the package's types are read. */
  const CANARY =
    "import { JobsService } from 'nestjs-mongo-jobs';\n" +
    'declare const jobs: JobsService;\n' +
    "await jobs.enqueue('x', {}, { dedupe_key: 'k' });\nexport {};\n";

  beforeAll(() => {
    rmSync(WORK, { recursive: true, force: true });
    mkdirSync(WORK, { recursive: true });
    const generated = generate(compiled);
    const canary = join(WORK, 'canary.ts');
    writeFileSync(canary, CANARY);
    diagnostics = compile(generated, [canary]);
  }, 120_000);

  it('every ```ts block of the README and docs/ compiles', () => {
    expect(diagnostics.filter((line) => !line.startsWith('canary.ts'))).toEqual([]);
  });

  it('reports an error in a block (the canary: an option enqueue does not take)', () => {
    expect(diagnostics.filter((line) => line.startsWith('canary.ts'))).toEqual([
      expect.stringMatching(/^canary\.ts:3: TS\d+ .*'dedupe_key' does not exist in type 'EnqueueOptions'/),
    ]);
  });

  it('finds the blocks (a check that compiles nothing proves nothing)', () => {
    expect(compiled.length).toBeGreaterThan(30);
    expect(compiled.filter((block) => block.page === 'README.md').length).toBeGreaterThanOrEqual(3);
  });

  it(`leaves out at most ${OPT_OUT_LIMIT} blocks, each with its reason, and has no marker without a block`, () => {
    const optOuts = blocks.filter((block) => block.notCompiled !== undefined);
    expect(optOuts.length).toBeLessThanOrEqual(OPT_OUT_LIMIT);
    for (const block of optOuts) expect(block.notCompiled?.trim().length).toBeGreaterThan(10);
    expect(all.flatMap(({ page, strayMarkers }) => strayMarkers.map((line) => `${page}:${line}`))).toEqual([]);
  });
});
