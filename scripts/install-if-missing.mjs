// `npm run sample` and `npm test` run this first, so on a fresh clone they are the only commands a contributor
// needs. It installs only when node_modules/ is absent: an existing one (possibly linked or hand-tuned) is never
// replaced behind the user's back; after a lockfile change, run `npm ci` yourself.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

if (!existsSync('node_modules')) {
  console.log('node_modules/ is missing (fresh clone): running npm ci first');
  execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { stdio: 'inherit', shell: process.platform === 'win32' });
}
