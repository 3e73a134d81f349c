import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { dashboardDirectory } from './dashboard-directory.cjs';

/** A file of the dashboard page, read once from `lib/dashboard/page/` (shipped in the package, no CDN). */
export interface DashboardAsset {
  body: Buffer;
  contentType: string;
}

/** The page's assets, by the name they are served under (`<path>/assets/<name>`): nothing else is served. */
const ASSET_TYPES: Record<string, string> = {
  'dashboard.js': 'text/javascript; charset=utf-8',
  'dashboard.css': 'text/css; charset=utf-8',
};

/**
 * Where the page's files are: `lib/dashboard/page/` of the package, found by walking up from the running code. The
 * package runs from `dist/dashboard/` or `dist/esm/dashboard/` (and ships `lib/`), the sample and the benchmarks from
 * their own build folders under `.cache/`, and the sources under jest from `lib/dashboard/` itself.
 */
function pageDirectory(): string {
  let directory = dashboardDirectory;
  for (let level = 0; level < 6; level += 1) {
    const candidate = join(directory, 'lib', 'dashboard', 'page');
    if (existsSync(join(candidate, 'index.html'))) return candidate;
    directory = dirname(directory);
  }
  throw new Error('The dashboard page (lib/dashboard/page/index.html) is missing from the installed package');
}

/** Reads the page (its `__BASE__` placeholder still to fill) and its assets. */
export function loadDashboardPage(): { html: string; assets: Map<string, DashboardAsset> } {
  const directory = pageDirectory();
  const html = readFileSync(join(directory, 'index.html'), 'utf8');
  const assets = new Map<string, DashboardAsset>();
  for (const [name, contentType] of Object.entries(ASSET_TYPES)) {
    assets.set(name, { body: readFileSync(join(directory, name)), contentType });
  }
  return { html, assets };
}
