import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** A deliberate break of the compiled package, to prove the checker catches it (no test hook in the library). */
export type Breakage = 'claim-ignores-owner' | 'purge-deletes-running';

interface Patch {
  file: string;
  from: string;
  to: string;
}

const PATCHES: Record<Breakage, Patch[]> = {
  // The reclaim takes any running row, not only those whose lease ran out: a live owner's job is taken from it.
  'claim-ignores-owner': [
    {
      file: 'persistence/claim-queries.js',
      from: "return { status: 'running', lockedUntil: { $lte: now } };",
      to: "return { status: 'running' };",
    },
  ],
  // purge() also deletes the running rows of the names it purges, whatever its finishedBefore says.
  'purge-deletes-running': [
    {
      file: 'persistence/job-admin.store.js',
      from: 'status: filter.status,',
      to: "status: { $in: [filter.status, 'running'] },",
    },
    {
      file: 'persistence/job-admin.store.js',
      from: '...(filter.finishedBefore !== undefined && { finishedAt: { $lt: filter.finishedBefore } }),',
      to: '',
    },
    {
      // Issue 25's guard (a row is deleted only once its lockedUntil has passed) would keep live running rows too.
      // The CommonJS build calls the imported `settledBy` as `(0, <module>.settledBy)(now)`.
      file: 'persistence/job-admin.store.js',
      from: '...(0, bounded_delete_js_1.settledBy)(now),\n',
      to: '',
    },
  ],
};

/**
 * Copies the built package (dist/, run `npm run build` first) into `.cache/torture-broken/<breakage>/` (inside the
 * repository, so its imports resolve to this repository's node_modules) and patches the copy's JavaScript text.
 * Returns the path to load instead of dist/. Throws when the text to patch is no longer there (the build changed).
 */
export function brokenBuild(breakage: Breakage): string {
  const target = resolve('.cache', 'torture-broken', breakage);
  mkdirSync(target, { recursive: true });
  cpSync(resolve('dist'), join(target, 'dist'), { recursive: true });
  for (const patch of PATCHES[breakage]) {
    const file = join(target, 'dist', patch.file);
    const source = readFileSync(file, 'utf8');
    if (source.split(patch.from).length !== 2) {
      throw new Error(`brokenBuild(${breakage}): expected exactly one "${patch.from}" in dist/${patch.file}`);
    }
    writeFileSync(file, source.replace(patch.from, patch.to));
  }
  return join(target, 'dist');
}
