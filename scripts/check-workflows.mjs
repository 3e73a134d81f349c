// actionlint over the public repository's GitHub Actions workflows (.github/workflows/): exits 1 on any finding, so
// .ci/run fails on a workflow GitHub would reject or run wrongly (it cannot run the workflow here). actionlint, pinned
// below, is built from its Go module with the Go toolchain (`go` on PATH, else /usr/local/go/bin/go) into the
// git-ignored .cache/actionlint/<version>/bin/ once, then reused; the build's module and compile caches are removed
// after it. actionlint checks the `run:` scripts with shellcheck when one is on PATH (.ci/run installs it, and GitHub's
// Ubuntu runners have it), so the check here is the one the workflow's own runs make.
//
//   node scripts/check-workflows.mjs [workflow.yml ...]   (default: every .github/workflows/*.yml and *.yaml)
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { REPO_ROOT } from './pack-package.mjs';

export const ACTIONLINT_VERSION = 'v1.7.12';
const MODULE = 'github.com/rhysd/actionlint/cmd/actionlint';
const HOME = join(REPO_ROOT, '.cache', 'actionlint', ACTIONLINT_VERSION);
const BINARY = join(HOME, 'bin', 'actionlint');

const seconds = (since) => `${((Date.now() - since) / 1000).toFixed(1)} s`;

/** The first of `names` found as an executable on PATH, else the first of `fallbacks` that exists. */
function which(name, fallbacks = []) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir !== '' && existsSync(join(dir, name))) return join(dir, name);
  }
  return fallbacks.find((path) => existsSync(path));
}

function install() {
  const go = which('go', ['/usr/local/go/bin/go']);
  if (!go) {
    console.error(
      `check-workflows: actionlint ${ACTIONLINT_VERSION} is not in ${HOME} and there is no Go toolchain to build it ` +
        '(no `go` on PATH or at /usr/local/go/bin/go): install Go 1.24 or later',
    );
    process.exit(1);
  }
  const build = join(HOME, 'build');
  rmSync(HOME, { recursive: true, force: true });
  mkdirSync(build, { recursive: true });
  const started = Date.now();
  console.log(`check-workflows: go install ${MODULE}@${ACTIONLINT_VERSION} into ${join(HOME, 'bin')}`);
  const env = {
    ...process.env,
    GOBIN: join(HOME, 'bin'),
    GOPATH: join(build, 'gopath'),
    GOMODCACHE: join(build, 'mod'),
    GOCACHE: join(build, 'cache'),
    // The module cache is read-only by default; writable, the build folder can be removed afterwards.
    GOFLAGS: [process.env.GOFLAGS, '-modcacherw'].filter(Boolean).join(' '),
  };
  try {
    execFileSync(go, ['install', `${MODULE}@${ACTIONLINT_VERSION}`], { env, stdio: 'inherit' });
  } catch (error) {
    rmSync(HOME, { recursive: true, force: true });
    console.error(`check-workflows: go install failed (${error.status ?? error.message})`);
    process.exit(1);
  }
  rmSync(build, { recursive: true, force: true });
  console.log(`check-workflows: built actionlint in ${seconds(started)}`);
}

const files =
  process.argv.length > 2
    ? process.argv.slice(2)
    : readdirSync(join(REPO_ROOT, '.github', 'workflows'))
        .filter((name) => /\.ya?ml$/.test(name))
        .map((name) => join('.github', 'workflows', name));
if (files.length === 0) {
  console.error('check-workflows: no workflow in .github/workflows/');
  process.exit(1);
}

if (!existsSync(BINARY)) install();
const shellcheck = which('shellcheck');
const args = ['-no-color', `-shellcheck=${shellcheck ?? ''}`, ...files];
const started = Date.now();
const result = spawnSync(BINARY, args, { cwd: REPO_ROOT, encoding: 'utf8' });
process.stdout.write(result.stdout ?? '');
process.stderr.write(result.stderr ?? '');
const how = shellcheck ? 'with shellcheck' : 'WITHOUT shellcheck (none on PATH: `run:` scripts not checked)';
if (result.status !== 0) {
  console.error(
    `check-workflows: actionlint ${ACTIONLINT_VERSION} ${how}: ${files.join(', ')}: FAILED (exit ${result.status})`,
  );
  process.exit(1);
}
console.log(`check-workflows: actionlint ${ACTIONLINT_VERSION} ${how}: ${files.join(', ')}: ok (${seconds(started)})`);
