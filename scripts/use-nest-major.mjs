// NEST_MAJOR: the NestJS major the test suite runs on (the CI workflow's matrix sets it). Unset, or the major of
// package.json's devDependencies, means the locked packages (package-lock.json). Another major listed in
// scripts/nest-majors.json means its packages, installed over the locked ones with `npm install --no-save`:
// package.json and the lockfile stay as they are, and `npm ci` brings the locked ones back.
//
//   node scripts/use-nest-major.mjs           installs NEST_MAJOR's packages when node_modules/ holds others (.ci/run)
//   node scripts/use-nest-major.mjs --check   installs nothing: exits 1 when node_modules/ does not hold NEST_MAJOR's
//                                             packages (jest's global setup runs this before every run)
//
// Prints one line naming the major and the installed versions. Exit codes: 0 ok, 1 other majors installed (or the
// install failed), 2 a NEST_MAJOR that this repository does not test. Runs in the current directory (the repo root).
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const root = process.cwd();
const check = process.argv.includes('--check');
const readJson = (path) => JSON.parse(readFileSync(path, 'utf8'));
/** The major of a version or of a range such as `^11.0.4`. */
const majorOf = (versionOrRange) => /^\D*(\d+)/.exec(versionOrRange)?.[1];

const devDependencies = readJson(join(root, 'package.json')).devDependencies ?? {};
const locked = Object.fromEntries(Object.entries(devDependencies).filter(([name]) => name.startsWith('@nestjs/')));
const lockedMajor = majorOf(locked['@nestjs/core']);
const alternatives = readJson(join(root, 'scripts', 'nest-majors.json'));
const offered = [lockedMajor, ...Object.keys(alternatives).filter((key) => /^\d+$/.test(key))];

const asked = (process.env.NEST_MAJOR ?? '').trim();
const major = asked === '' ? lockedMajor : asked;
if (!offered.includes(major)) {
  console.error(
    `NEST_MAJOR=${asked}: the suite runs on NestJS ${offered.join(' or ')} ` +
      `(${lockedMajor} as package.json's devDependencies lock it, others from scripts/nest-majors.json)`,
  );
  process.exit(2);
}
const ranges = major === lockedMajor ? locked : alternatives[major];
const source =
  asked === '' ? 'NEST_MAJOR unset: as locked' : `NEST_MAJOR=${asked}${major === lockedMajor ? ', as locked' : ''}`;

/** Each package of `ranges` with the version in node_modules/ (undefined when absent). */
function installed() {
  return Object.keys(ranges).map((name) => {
    const file = join(root, 'node_modules', name, 'package.json');
    return { name, version: existsSync(file) ? readJson(file).version : undefined };
  });
}
const wrongMajor = (found) =>
  found.filter(({ name, version }) => version === undefined || majorOf(version) !== majorOf(ranges[name]));
const list = (found) => found.map(({ name, version }) => `${name} ${version ?? '(missing)'}`).join(', ');

let found = installed();
if (!check && major !== lockedMajor && wrongMajor(found).length > 0) {
  const specs = Object.entries(ranges).map(([name, range]) => `${name}@${range}`);
  console.log(`NestJS ${major} (${source}): npm install --no-save ${specs.join(' ')}`);
  try {
    execFileSync('npm', ['install', '--no-save', '--no-audit', '--no-fund', ...specs], {
      cwd: root,
      stdio: 'inherit',
      shell: process.platform === 'win32',
    });
  } catch (error) {
    console.error(`NestJS ${major}: npm install failed (${error.status ?? error.message})`);
    process.exit(1);
  }
  found = installed();
}
const wrong = wrongMajor(found);
if (wrong.length > 0) {
  const remedy =
    major === lockedMajor
      ? 'run `npm ci` for the locked packages'
      : 'run `node scripts/use-nest-major.mjs` to install them';
  console.error(`NestJS ${major} (${source}), but node_modules/ has ${list(wrong)}: ${remedy}`);
  process.exit(1);
}
console.log(`NestJS ${major} (${source}): ${list(found)}`);
