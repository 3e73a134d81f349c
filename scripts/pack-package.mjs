// Packs the repository as `npm publish` would (its prepare script rebuilds dist/ first), for the checks that install the package into
// apps of their own: scripts/check-consumers.mjs and scripts/check-typescript-floor.mjs. Run directly, it prints the
// tarball's path, so .ci/run packs once and hands the path to both (`--tarball PATH`).
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** `npm pack` into .cache/; resolves to the tarball's absolute path. */
export function packPackage() {
  const destination = join(REPO_ROOT, '.cache');
  mkdirSync(destination, { recursive: true });
  // --json: the tarball's name without parsing npm's human output (prepack's build output goes to stderr).
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', destination], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [{ filename }] = JSON.parse(out.slice(out.indexOf('[')));
  return join(destination, filename);
}

/** The `--tarball PATH` argument, or a fresh pack when there is none. */
export function tarballFromArgs(args) {
  const index = args.indexOf('--tarball');
  if (index === -1) return packPackage();
  const path = args[index + 1];
  if (!path) throw new Error('--tarball needs a path');
  return resolve(path);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  console.log(packPackage());
}
