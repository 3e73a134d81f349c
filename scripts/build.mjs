// `npm run build`: the CommonJS build (dist/, type-checked) and the ES module build (dist/esm/, emit only) at once, as
// two compiler processes: on a 2-core machine that takes the time of the longer one, not of both. Then dist/esm/ gets
// a package.json marking its `.js` files as ES modules (the package's own package.json has no "type").
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

/** Runs tsc on `project`; resolves its exit code (its output goes to ours). */
const compile = (project) =>
  new Promise((resolve) => {
    const child = spawn(process.execPath, [tsc, '-p', project], { stdio: 'inherit' });
    child.on('error', (error) => {
      console.error(`build: could not start tsc for ${project}: ${error.message}`);
      resolve(1);
    });
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });

const codes = await Promise.all([compile('tsconfig.build.json'), compile('tsconfig.build.esm.json')]);
if (codes.some((code) => code !== 0)) process.exit(1);
writeFileSync('dist/esm/package.json', `${JSON.stringify({ type: 'module' })}\n`);
