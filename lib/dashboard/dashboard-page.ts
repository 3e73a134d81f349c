import { readFileSync } from 'node:fs';
import { join } from 'node:path';

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
 * Where the page's files are. The built package runs as CommonJS from `dist/dashboard/`, and `files` ships `lib/`;
 * the sources run as ES modules only under jest (from the repository root), where `__dirname` does not exist.
 */
function pageDirectory(): string {
  const root = typeof __dirname === 'string' ? join(__dirname, '..', '..') : process.cwd();
  return join(root, 'lib', 'dashboard', 'page');
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
