// Installs this package the way README's "from a git URL" line does, and loads it: the commit at HEAD is pushed to
// a temporary bare repository, and a scratch app under .cache/install-from-git/ runs
// `npm install git+file://<that repository>#<commit> @nestjs/mongoose mongoose @nestjs/schedule`. npm clones it,
// installs its devDependencies and runs its `prepare` script (which builds dist/), as it would from GitHub; then the app
// require()s and imports the package and its subpaths. Only committed work is checked (a dirty tree is reported).
// It takes minutes on a cold npm cache (the clone's devDependencies are installed), so it runs as its own CI step,
// not inside `npm test`. Usage: node scripts/check-install-from-git.mjs
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const scratch = join(repo, '.cache', 'install-from-git');
const bare = join(scratch, 'nestjs-mongo-jobs.git');
const app = join(scratch, 'app');
const started = Date.now();

const seconds = (since) => `${((Date.now() - since) / 1000).toFixed(1)} s`;
const run = (command, args, cwd) =>
  execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
const fail = (message) => {
  console.error(`install from git: FAILED: ${message}`);
  process.exit(1);
};

const head = run('git', ['rev-parse', 'HEAD'], repo).trim();
const dirty = run('git', ['status', '--porcelain', '--untracked-files=no'], repo).trim();
if (dirty) console.log(`install from git: uncommitted changes are not part of this check (it installs ${head})`);

rmSync(scratch, { recursive: true, force: true });
mkdirSync(app, { recursive: true });
run('git', ['init', '--quiet', '--bare', bare], repo);
run('git', ['push', '--quiet', bare, `${head}:refs/heads/main`], repo);
run('git', ['symbolic-ref', 'HEAD', 'refs/heads/main'], bare);

const url = `git+file://${bare}#${head}`;
writeFileSync(
  join(app, 'package.json'),
  `${JSON.stringify({ name: 'install-from-git-app', private: true, version: '1.0.0' }, null, 2)}\n`,
);
const installStarted = Date.now();
console.log(`install from git: npm install ${url} @nestjs/mongoose mongoose @nestjs/schedule`);
try {
  const out = run(
    'npm',
    ['install', '--no-audit', '--no-fund', '--allow-git=root', url, '@nestjs/mongoose', 'mongoose', '@nestjs/schedule'],
    app,
  );
  process.stdout.write(out);
} catch (error) {
  process.stdout.write(error.stdout ?? '');
  process.stderr.write(error.stderr ?? '');
  fail(`npm install exited with ${error.status}`);
}
console.log(`install from git: installed in ${seconds(installStarted)}`);

const installed = join(app, 'node_modules', 'nestjs-mongo-jobs');
const lock = JSON.parse(readFileSync(join(app, 'package-lock.json'), 'utf8'));
const resolved = lock.packages?.['node_modules/nestjs-mongo-jobs']?.resolved ?? '';
if (!resolved.startsWith('git+file://') || !resolved.endsWith(head)) {
  fail(`the lockfile resolves nestjs-mongo-jobs to ${JSON.stringify(resolved)}, not the git commit ${head}`);
}
for (const file of ['dist/index.js', 'dist/index.d.ts', 'dist/testing/index.js', 'lib/index.ts']) {
  if (!existsSync(join(installed, file)))
    fail(`the installed package has no ${file} (did its prepare script build dist/?)`);
}

// The app loads the package both ways an application does, the main entry point and the subpaths users import.
const expectations = `
  const failures = [];
  const expectFunction = (where, value) => { if (typeof value !== 'function') failures.push(where + ' is ' + typeof value); };
  expectFunction('JobsModule.forRoot', main.JobsModule?.forRoot);
  expectFunction('JobHandler', main.JobHandler);
  expectFunction('JobsService', main.JobsService);
  expectFunction('testing.createTestJobContext', testing.createTestJobContext);
  expectFunction('dashboard.JobsDashboardModule.forRoot', dashboard.JobsDashboardModule?.forRoot);
  if (failures.length > 0) { console.error(failures.join('\\n')); process.exit(1); }
`;
const loaders = {
  'require()': [
    '-e',
    `const main = require('nestjs-mongo-jobs'); const testing = require('nestjs-mongo-jobs/testing');
     const dashboard = require('nestjs-mongo-jobs/dashboard'); ${expectations}`,
  ],
  import: [
    '--input-type=module',
    '-e',
    `const main = await import('nestjs-mongo-jobs'); const testing = await import('nestjs-mongo-jobs/testing');
     const dashboard = await import('nestjs-mongo-jobs/dashboard'); ${expectations}`,
  ],
};
for (const [how, args] of Object.entries(loaders)) {
  try {
    run(process.execPath, args, app);
  } catch (error) {
    fail(`${how} of the installed package failed:\n${error.stderr || error.message}`);
  }
}
const version = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')).version;
console.log(
  `install from git: OK, nestjs-mongo-jobs ${version} from ${head.slice(0, 12)} loads with require() and import (${seconds(started)} in all)`,
);
