// Users' own tests, as they write them: each app under test/consumers/ (a NestJS 12 ES module app, a NestJS 11
// CommonJS app, made by `nest new`) is copied into .cache/consumers/<name>/, completed with the code blocks its
// consumer.json names from the docs page it names (docs/testing.md), given the packed package, installed with npm, and
// its test commands run, the e2e ones against a MongoDB (MONGODB_URI when set, else the in-memory Java test server).
// Prints a table; exits 1 on any failure.
//
//   node scripts/check-consumers.mjs [--tarball PATH] [name ...]
import { execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  copyFileSync,
  cpSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { startJavaMongoServer } from './java-mongo-server.mjs';
import { REPO_ROOT, tarballFromArgs } from './pack-package.mjs';
import { findSnippet, mergeJson, readmeSnippets } from './readme-snippets.mjs';

const FIXTURES_DIR = join(REPO_ROOT, 'test', 'consumers');
const WORK_DIR = join(REPO_ROOT, '.cache', 'consumers');
/** A test command that hangs is stopped after this long (its process group is killed). */
const COMMAND_TIMEOUT_MS = 5 * 60_000;
/** Lines of a failed command's output printed under the table (the whole log stays in its app's folder). */
const FAILURE_TAIL_LINES = 80;

const seconds = (since) => ((Date.now() - since) / 1000).toFixed(1);

/** The fixture's files, then the docs blocks its consumer.json names: files written, package.json blocks merged. */
function prepare(name, tarball) {
  const source = join(FIXTURES_DIR, name);
  const target = join(WORK_DIR, name);
  const manifest = JSON.parse(readFileSync(join(source, 'consumer.json'), 'utf8'));
  const snippets = readmeSnippets(readFileSync(join(REPO_ROOT, manifest.page), 'utf8'), manifest.page);
  mkdirSync(target, { recursive: true });
  // A fresh copy of the sources each run; node_modules stays for the next install to reuse.
  for (const entry of readdirSync(target)) {
    if (entry !== 'node_modules') rmSync(join(target, entry), { recursive: true, force: true });
  }
  cpSync(source, target, { recursive: true, filter: (path) => !path.endsWith('consumer.json') });
  let packageJson = JSON.parse(readFileSync(join(target, 'package.json'), 'utf8'));
  for (const { heading, file } of manifest.blocks) {
    const snippet = findSnippet(snippets, heading, file, manifest.page);
    if (file === 'package.json') {
      packageJson = mergeJson(packageJson, JSON.parse(snippet.code));
    } else {
      mkdirSync(dirname(join(target, file)), { recursive: true });
      writeFileSync(join(target, file), snippet.code);
    }
  }
  writeFileSync(join(target, 'package.json'), `${JSON.stringify(packageJson, null, 2)}\n`);
  // What `npm install ./nestjs-mongo-jobs-<version>.tgz` records, under a name that does not change with the version.
  copyFileSync(tarball, join(target, 'nestjs-mongo-jobs.tgz'));
  return { dir: target, manifest };
}

/**
 * `npm install` when the app's package.json (or the package's own dependencies) changed since the last install;
 * otherwise only the tarball is unpacked over the installed copy, which is all a reinstall would change.
 */
function install(dir, tarball) {
  const packedManifest = execFileSync('tar', ['-xzOf', tarball, 'package/package.json'], { encoding: 'utf8' });
  const { dependencies, peerDependencies } = JSON.parse(packedManifest);
  const stamp = createHash('sha256')
    .update(readFileSync(join(dir, 'package.json')))
    .update(JSON.stringify({ dependencies, peerDependencies, node: process.version }))
    .digest('hex');
  const stampFile = join(dir, 'node_modules', '.consumer-install-stamp');
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) {
    const installed = join(dir, 'node_modules', 'nestjs-mongo-jobs');
    rmSync(installed, { recursive: true, force: true });
    mkdirSync(installed, { recursive: true });
    execFileSync('tar', ['-xzf', tarball, '-C', installed, '--strip-components=1']);
    return { ok: true, how: 'reused' };
  }
  rmSync(stampFile, { force: true });
  const log = join(dir, 'npm-install.log');
  try {
    execFileSync('npm', ['install', '--no-audit', '--no-fund'], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (error) {
    writeFileSync(log, `${error.stdout ?? ''}${error.stderr ?? ''}`);
    return { ok: false, how: 'fresh', log };
  }
  writeFileSync(stampFile, stamp);
  return { ok: true, how: 'fresh' };
}

/** The server URI with a database of its own for one command (a replica set's query string is kept). */
function withDatabase(uri, database) {
  const match = /^(mongodb(?:\+srv)?:\/\/[^/?]+)\/?[^?]*(\?.*)?$/.exec(uri);
  if (!match) throw new Error(`MONGODB_URI is not a mongodb:// connection string: ${uri}`);
  return `${match[1]}/${database}${match[2] ?? ''}`;
}

/** Runs one command line in the app's folder; its output goes to a log file. Resolves to `{ ok, log, reason }`. */
function runCommand(dir, command, env, logName) {
  const log = join(dir, logName);
  const out = createWriteStream(log);
  return new Promise((resolveRun) => {
    // Its own process group, so a timeout stops the test runner and everything it started.
    const child = spawn('bash', ['-c', command], {
      cwd: dir,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.pipe(out, { end: false });
    child.stderr.pipe(out, { end: false });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      process.kill(-child.pid, 'SIGKILL');
    }, COMMAND_TIMEOUT_MS);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      out.end(() => {
        const reason = timedOut ? `timed out after ${COMMAND_TIMEOUT_MS / 1000} s` : `exit ${code ?? signal}`;
        resolveRun({ ok: code === 0 && !timedOut, log, reason });
      });
    });
  });
}

function printTable(rows) {
  const header = ['app', 'step', 'result', 'seconds'];
  const cells = rows.map((row) => [row.app, row.step, row.result, row.seconds]);
  const widths = header.map((title, column) => Math.max(title.length, ...cells.map((row) => row[column].length)));
  const line = (row) => `| ${row.map((cell, column) => cell.padEnd(widths[column])).join(' | ')} |`;
  console.log(line(header));
  console.log(line(widths.map((width) => '-'.repeat(width))));
  for (const row of cells) console.log(line(row));
}

function tail(file, count) {
  if (!existsSync(file)) return '(no output)';
  return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-count).join('\n');
}

async function main(args) {
  const names = args.filter((arg, index) => !arg.startsWith('--') && args[index - 1] !== '--tarball');
  const fixtures = readdirSync(FIXTURES_DIR).filter((name) => names.length === 0 || names.includes(name));
  const unknown = names.filter((name) => !fixtures.includes(name));
  if (unknown.length) throw new Error(`No consumer app named ${unknown.join(', ')} in test/consumers/`);

  const rows = [];
  const failures = [];
  let started = Date.now();
  const tarball = tarballFromArgs(args);
  rows.push({
    app: '-',
    step: args.includes('--tarball') ? 'tarball given' : 'npm pack',
    result: 'ok',
    seconds: seconds(started),
  });
  let mongo;
  const mongoUri = async () => {
    if (!mongo) {
      const since = Date.now();
      mongo = process.env.MONGODB_URI
        ? { uri: process.env.MONGODB_URI, description: 'MONGODB_URI', stop: async () => {} }
        : await startJavaMongoServer();
      rows.push({ app: '-', step: `MongoDB: ${mongo.description}`, result: 'ok', seconds: seconds(since) });
    }
    return mongo.uri;
  };

  try {
    for (const name of fixtures) {
      started = Date.now();
      const { dir, manifest } = prepare(name, tarball);
      const installed = install(dir, tarball);
      rows.push({
        app: name,
        step: `install (${installed.how})`,
        result: installed.ok ? 'ok' : 'FAILED',
        seconds: seconds(started),
      });
      if (!installed.ok) {
        failures.push({ app: name, step: 'npm install', log: installed.log, reason: 'npm install failed' });
        continue;
      }
      for (const [index, step] of manifest.commands.entries()) {
        const env = { ...process.env, npm_config_update_notifier: 'false' };
        delete env.MONGODB_URI;
        if (step.mongodb) {
          const database = `consumer_${name}_${index}_${randomBytes(3).toString('hex')}`.replace(/[^\w]/g, '_');
          env.MONGODB_URI = withDatabase(await mongoUri(), database);
        }
        started = Date.now();
        const result = await runCommand(dir, step.run, env, `step-${index}.log`);
        rows.push({ app: name, step: step.run, result: result.ok ? 'ok' : 'FAILED', seconds: seconds(started) });
        if (!result.ok) failures.push({ app: name, step: step.run, log: result.log, reason: result.reason });
      }
    }
  } finally {
    await mongo?.stop();
  }

  printTable(rows);
  for (const failure of failures) {
    console.log(`\n--- ${failure.app}: ${failure.step} (${failure.reason}); last lines of ${failure.log}:`);
    console.log(tail(failure.log, FAILURE_TAIL_LINES));
  }
  const steps = rows.filter((row) => row.app !== '-').length;
  console.log(`\nConsumer apps: ${steps - failures.length} of ${steps} steps ok`);
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
