/**
 * What the cross-site check reads from a request. Express 5 and Fastify both expose `protocol` and `host` (with its
 * port), taking `X-Forwarded-Proto` / `X-Forwarded-Host` into account only when the app trusts its proxy (Express's
 * `trust proxy` setting, Fastify's `trustProxy`); the headers themselves are never read here.
 */
export interface CrossSiteCheckRequest {
  headers: Record<string, string | string[] | undefined>;
  protocol?: unknown;
  host?: unknown;
  socket?: { encrypted?: boolean };
}

/**
 * Why a state-changing dashboard call must be refused as cross-site, or null when it may go on:
 * - with `Sec-Fetch-Site` (sent by every current browser, and not settable by a page): only `same-origin` passes,
 *   or a request whose `Origin` is in `allowedOrigins`;
 * - without it, an `Origin` must be the request's own origin (its scheme and host as the app sees them) or be in
 *   `allowedOrigins` (`Origin: null`, sent by sandboxed frames and `file:` pages, never is);
 * - with neither header the caller is not a browser acting for a logged-in user (curl, server-to-server): it passes.
 */
export function crossSiteRefusal(request: CrossSiteCheckRequest, allowedOrigins: ReadonlySet<string>): string | null {
  const site = header(request, 'sec-fetch-site');
  const origin = header(request, 'origin');
  if (origin !== undefined && allowedOrigins.has(origin)) return null;
  if (site !== undefined) {
    return site === 'same-origin' ? null : `the browser says it is ${JSON.stringify(site)}, not same-origin`;
  }
  if (origin === undefined || origin === ownOrigin(request)) return null;
  return "its Origin is not the request's own origin (behind a proxy, set the app's trust proxy)";
}

/** The request's own origin as the app sees it (per its trust-proxy setting), or null when it cannot be told. */
function ownOrigin(request: CrossSiteCheckRequest): string | null {
  const protocol =
    typeof request.protocol === 'string' ? request.protocol : request.socket?.encrypted ? 'https' : 'http';
  const host = typeof request.host === 'string' ? request.host : header(request, 'host');
  if ((protocol !== 'http' && protocol !== 'https') || host === undefined) return null;
  if (!URL.canParse(`${protocol}://${host}`)) return null;
  const url = new URL(`${protocol}://${host}`);
  // A "host" carrying a path, credentials, query or fragment is no host: no origin matches it.
  const hostOnly = url.pathname === '/' && !url.username && !url.password && !url.search && !url.hash;
  return hostOnly ? url.origin : null;
}

function header(request: CrossSiteCheckRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}
