// The TypeScript floor: a consumer that imports every entry point (the root, /testing, /health, /dashboard) is
// compiled against the packed package's .d.ts under each supported moduleResolution, with and without skipLibCheck,
// with the peers of a NestJS 12 app and of a NestJS 11 app, by the lowest TypeScript the README promises. Installs
// into .cache/typescript-floor/<peers>/ (reused while its package.json is unchanged).
//
//   node scripts/check-typescript-floor.mjs [--tarball PATH]     the minimum, every mode, both peer sets (.ci/run)
//   node scripts/check-typescript-floor.mjs --matrix 4.9,5.0,5.8 [--peers nest12] [--tarball PATH]
//                                                               a table over versions, every case (measuring)
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT, tarballFromArgs } from './pack-package.mjs';

/** The lowest TypeScript the README's Install section promises; keep the two in step. */
export const TYPESCRIPT_FLOOR = '5.0';

const WORK_DIR = join(REPO_ROOT, '.cache', 'typescript-floor');

/** What an app has next to the package: its peers, for each NestJS major, and Node's types. */
const PEER_SETS = {
  nest12: {
    '@nestjs/common': '^12.0.0',
    '@nestjs/core': '^12.0.0',
    '@nestjs/mongoose': '^12.0.0',
    '@nestjs/schedule': '^12.0.0',
    '@nestjs/terminus': '^12.0.0',
    '@types/node': '^20.19.0',
    mongoose: '^9.0.0',
    'reflect-metadata': '^0.2.2',
    rxjs: '^7.8.1',
  },
  nest11: {
    '@nestjs/common': '^11.0.0',
    '@nestjs/core': '^11.0.0',
    '@nestjs/mongoose': '^11.0.0',
    '@nestjs/schedule': '^6.0.0',
    '@nestjs/terminus': '^11.0.0',
    '@types/node': '^20.19.0',
    mongoose: '^8.0.0',
    'reflect-metadata': '^0.2.2',
    rxjs: '^7.8.1',
  },
};

/** Uses a type or a value from every entry point, so each one's declarations are resolved and checked. */
const CONSUMER_SOURCE = `import { type JobExecutionContext, JobHandler, JobsModule, type JobsService } from 'nestjs-mongo-jobs';
import { JobsDashboardModule } from 'nestjs-mongo-jobs/dashboard';
import { JobsHealthIndicator } from 'nestjs-mongo-jobs/health';
import { createTestJobContext } from 'nestjs-mongo-jobs/testing';

export class ReportJobs {
  @JobHandler('report.build', { maxAttempts: 3 })
  async build(payload: { reportId: string }, ctx: JobExecutionContext): Promise<string> {
    ctx.signal.throwIfAborted();
    await ctx.updateProgress({ done: 1, total: 1 });
    return payload.reportId;
  }
}

export async function enqueue(jobs: JobsService): Promise<string> {
  const job = await jobs.enqueue('report.build', { reportId: 'r1' }, { dedupeKey: 'r1' });
  return job.id;
}

export const modules = [JobsModule.forRoot({ concurrency: 2 }), JobsDashboardModule.forRoot({ path: 'jobs' })];
export const indicator: typeof JobsHealthIndicator = JobsHealthIndicator;
export const progress: number = createTestJobContext({ attempt: 2 }).progressUpdates.length;
`;

/**
 * The moduleResolution modes, each with the module setting that goes with it and the package type of the consumer
 * (nodenext and node16 read it to decide whether the importing file is an ES module or CommonJS).
 */
const MODES = [
  { id: 'nodenext-esm', module: 'nodenext', moduleResolution: 'nodenext', type: 'module', since: '4.7' },
  { id: 'nodenext-cjs', module: 'nodenext', moduleResolution: 'nodenext', type: 'commonjs', since: '4.7' },
  { id: 'node16-esm', module: 'node16', moduleResolution: 'node16', type: 'module', since: '4.7' },
  { id: 'node16-cjs', module: 'node16', moduleResolution: 'node16', type: 'commonjs', since: '4.7' },
  { id: 'bundler', module: 'esnext', moduleResolution: 'bundler', type: 'module', since: '5.0' },
  // node10 is the name TypeScript 5.0 gave the classic "node" resolution (older versions know only "node"); 6.0
  // deprecates it (ignoreDeprecations: "6.0" keeps it) and 7.0 removes it.
  { id: 'node10', module: 'commonjs', moduleResolution: 'node10', type: 'commonjs', since: '4.7', until: '6.0' },
];

const versionNumber = (version) => {
  const [major, minor] = version.split('.').map(Number);
  return major * 100 + minor;
};

/**
 * Installs one peer set, the tarball, and each TypeScript version under an alias (ts-5.0, …) into
 * .cache/typescript-floor/<peers>/; resolves to that folder and how it was installed.
 */
function install(tarball, peers, versions) {
  const dir = join(WORK_DIR, peers);
  mkdirSync(dir, { recursive: true });
  const packageJson = {
    name: `typescript-floor-${peers}`,
    private: true,
    dependencies: {
      'nestjs-mongo-jobs': 'file:nestjs-mongo-jobs.tgz',
      ...PEER_SETS[peers],
      ...Object.fromEntries(versions.map((version) => [`ts-${version}`, `npm:typescript@~${version}.0`])),
    },
  };
  const text = `${JSON.stringify(packageJson, null, 2)}\n`;
  const stamp = createHash('sha256').update(text).digest('hex');
  const stampFile = join(dir, 'node_modules', '.install-stamp');
  const installed = join(dir, 'node_modules', 'nestjs-mongo-jobs');
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) {
    // Same dependencies: only the package changed, so unpack the new tarball where npm put the old one.
    rmSync(installed, { recursive: true, force: true });
    mkdirSync(installed, { recursive: true });
    execFileSync('tar', ['-xzf', tarball, '-C', installed, '--strip-components=1']);
    return { dir, how: 'reused' };
  }
  copyFileSync(tarball, join(dir, 'nestjs-mongo-jobs.tgz'));
  writeFileSync(join(dir, 'package.json'), text);
  rmSync(join(dir, 'package-lock.json'), { force: true });
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, stdio: 'inherit' });
  writeFileSync(stampFile, stamp);
  return { dir, how: 'fresh' };
}

/**
 * Why a case is outside what the README promises, or undefined: two limits of the peers, not of this package.
 * - NestJS 12 is ES modules only, so a CommonJS file importing it (the app's own imports, and this package's CommonJS
 *   declarations) is an error (TS1479) under node16, and under nodenext before TypeScript 5.8, the first to model
 *   Node's require() of ES modules; skipLibCheck hides it only in the declarations.
 * - mongoose 9's own declarations need TypeScript 5.3 when they are checked (TS2589 in its populate.d.ts before).
 */
function outsidePromise(peers, mode, skipLibCheck, version) {
  if (peers !== 'nest12' || skipLibCheck) return undefined;
  if (mode.type === 'commonjs' && mode.id !== 'node10') {
    if (mode.moduleResolution !== 'nodenext' || versionNumber(version) < 508) return 'Nest 12 is ESM only';
  }
  if (versionNumber(version) < 503) return 'mongoose 9 needs 5.3';
  return undefined;
}

/** Compiles the consumer in one mode; resolves to the errors, grouped by where they are. */
async function compile(root, version, mode, skipLibCheck) {
  const dir = join(root, 'cases', `${version}-${mode.id}-${skipLibCheck ? 'skip' : 'full'}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ type: mode.type })}\n`);
  writeFileSync(join(dir, 'consumer.ts'), CONSUMER_SOURCE);
  const moduleResolution =
    mode.moduleResolution === 'node10' && versionNumber(version) < 500 ? 'node' : mode.moduleResolution;
  const compilerOptions = {
    target: 'ES2022',
    module: mode.module,
    moduleResolution,
    strict: true,
    esModuleInterop: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    skipLibCheck,
    types: ['node'],
    noEmit: true,
    ...(mode.id === 'node10' && versionNumber(version) >= 600 ? { ignoreDeprecations: '6.0' } : {}),
  };
  writeFileSync(
    join(dir, 'tsconfig.json'),
    `${JSON.stringify({ compilerOptions, files: ['consumer.ts'] }, null, 2)}\n`,
  );
  const tsc = join(root, 'node_modules', `ts-${version}`, 'bin', 'tsc');
  const run = await new Promise((done, reject) => {
    const child = spawn(process.execPath, [tsc, '-p', dir, '--pretty', 'false'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.stderr.on('data', (chunk) => {
      output += chunk;
    });
    child.once('error', reject);
    child.once('close', (status) => done({ status, output }));
  });
  const lines = run.output.split('\n').filter((line) => /error TS\d+/.test(line));
  const ours = lines.filter((line) => line.includes('node_modules/nestjs-mongo-jobs/'));
  const consumer = lines.filter((line) => line.includes('consumer.ts('));
  // Errors with no file are about the options (a deprecated or removed moduleResolution, say).
  const options = lines.filter((line) => line.startsWith('error TS'));
  const others = lines.filter((line) => !ours.includes(line) && !consumer.includes(line) && !options.includes(line));
  return { ok: run.status === 0, ours, consumer, options, others };
}

/** One cell of the table: "ok", or the errors' count and the first one's code, by origin. */
function describe(result) {
  if (result.ok) return 'ok';
  const code = (line) => /error (TS\d+)/.exec(line)?.[1] ?? '?';
  const parts = [];
  if (result.ours.length) parts.push(`pkg ${result.ours.length}×${code(result.ours[0])}`);
  if (result.consumer.length) parts.push(`app ${result.consumer.length}×${code(result.consumer[0])}`);
  if (result.options.length) parts.push(`options ${code(result.options[0])}`);
  if (result.others.length) parts.push(`deps ${result.others.length}×${code(result.others[0])}`);
  return parts.join(' ') || 'failed';
}

function printTable(header, rows) {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (cells) => `| ${cells.map((cell, column) => cell.padEnd(widths[column])).join(' | ')} |`;
  console.log(line(header));
  console.log(line(widths.map((width) => '-'.repeat(width))));
  for (const row of rows) console.log(line(row));
}

/** Runs `tasks` (functions returning promises), at most `limit` at a time; resolves to their results in order. */
async function inPool(tasks, limit) {
  const results = new Array(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const index = next++;
      results[index] = await tasks[index]();
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, worker));
  return results;
}

async function main(args) {
  const matrixIndex = args.indexOf('--matrix');
  const matrix = matrixIndex !== -1;
  const versions = matrix ? args[matrixIndex + 1].split(',') : [TYPESCRIPT_FLOOR];
  const peersIndex = args.indexOf('--peers');
  const peerSets = peersIndex === -1 ? Object.keys(PEER_SETS) : args[peersIndex + 1].split(',');
  const tarball = tarballFromArgs(args);

  const rows = [];
  const failures = [];
  for (const peers of peerSets) {
    const started = Date.now();
    const { dir, how } = install(tarball, peers, versions);
    console.log(`${peers}: installed into ${dir} (${how}, ${((Date.now() - started) / 1000).toFixed(1)} s)`);
    for (const version of versions) {
      const tscVersion = JSON.parse(
        readFileSync(join(dir, 'node_modules', `ts-${version}`, 'package.json'), 'utf8'),
      ).version;
      const cases = MODES.flatMap((mode) => [true, false].map((skipLibCheck) => ({ mode, skipLibCheck })));
      // One tsc per core: each compile loads the peers' declarations (mongoose's are large) and takes seconds.
      const cells = await inPool(
        cases.map(({ mode, skipLibCheck }) => async () => {
          const unsupported =
            versionNumber(version) < versionNumber(mode.since) ||
            (mode.until && versionNumber(version) > versionNumber(mode.until));
          const outside = outsidePromise(peers, mode, skipLibCheck, version);
          if (unsupported) return 'n/a';
          if (outside && !matrix) return `(${outside})`;
          const result = await compile(dir, version, mode, skipLibCheck);
          if (!result.ok && !outside) {
            failures.push({ peers, version: tscVersion, mode: mode.id, skipLibCheck, result });
          }
          return describe(result) + (outside ? ` (${outside})` : '');
        }),
        availableParallelism(),
      );
      rows.push([peers, tscVersion, ...cells]);
    }
  }
  printTable(['peers', 'tsc', ...MODES.flatMap((mode) => [`${mode.id} skip`, `${mode.id} full`])], rows);
  for (const failure of failures.slice(0, 12)) {
    const { ours, consumer, options, others } = failure.result;
    const lines = [...ours, ...consumer, ...options, ...others];
    console.log(
      `\n${failure.peers}, TypeScript ${failure.version}, ${failure.mode}, skipLibCheck: ${failure.skipLibCheck}:`,
    );
    for (const line of lines.slice(0, 4)) console.log(`  ${line}`);
    if (lines.length > 4) console.log(`  … ${lines.length - 4} more`);
  }
  const verdict = failures.length ? `${failures.length} cases fail` : 'every case compiles';
  console.log(`\nTypeScript ${versions.join(', ')} (${peerSets.join(', ')}): ${verdict}`);
  return failures.length === 0;
}

main(process.argv.slice(2)).then(
  (ok) => {
    process.exitCode = ok ? 0 : 1;
  },
  (error) => {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
  },
);
