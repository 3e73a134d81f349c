import type { CanActivate, Type } from '@nestjs/common';
import { DashboardGuardRequiredError } from '../model/errors/dashboard-guard-required.error.js';
import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { resolveAllowedOrigins } from './allowed-origins.js';
import { resolveRouteMetadata } from './route-metadata.js';

/** Options of `JobsDashboardModule.forRoot`. */
export interface JobsDashboardOptions {
  /** Where the dashboard is mounted; its JSON API is under `<path>/api/`. @default 'jobs' */
  path?: string;
  /**
   * Guards every dashboard route (reads included): a Nest `CanActivate` class, instantiated by Nest in the dashboard's
   * module, so it can inject global providers (e.g. `JobsService`, a global auth or config module's services).
   * Required unless `allowAnonymous` is `true`.
   */
  guard?: Type<CanActivate>;
  /** Serve the dashboard without a guard, to anyone who can reach the app. @default false */
  allowAnonymous?: boolean;
  /** Do not mount the state-changing routes (retry, cancel, bulk retry, purge): they answer 404. @default false */
  readOnly?: boolean;
  /** Include jobs' `payload` and `result` in answers (they may hold personal data or secrets). @default false */
  showPayloads?: boolean;
  /**
   * Metadata set on every dashboard controller class and every route handler (page, assets and API), as
   * `@SetMetadata(key, value)` on both would, for guards that read route metadata, e.g. `{ roles: ['admin'] }` for a
   * `RolesGuard`, or `{ [Roles.KEY]: ['admin'] }` for a decorator made with `Reflector.createDecorator`. A plain object
   * with non-empty string keys, none of them one of Nest's own metadata keys (`path`, `__guards__`, …).
   * @default {}
   */
  routeMetadata?: Readonly<Record<string, unknown>>;
  /**
   * Other origins (`scheme://host[:port]`, as a browser's `Origin` header spells them) whose pages may make the
   * state-changing calls (retry, cancel, bulk retry, purge). The dashboard's own origin needs no entry; every other
   * cross-site call is refused with 403 whatever the app's CORS settings.
   * @default []
   */
  allowedOrigins?: readonly string[];
  /**
   * Include failed attempts' `stack` in answers, and show it in the page's job panel: the error's stack and its
   * `cause` chain, which can name hosts, file paths, queries or credentials (a driver's connection error). Without
   * it, attempts keep their `error` message and `errorClass`. Separate from `showPayloads`: debugging a failure
   * should not require exposing customers' data, nor the other way round. @default false
   */
  showStacks?: boolean;
}

/** The options with defaults applied; `path` has no leading or trailing slash. */
export interface ResolvedDashboardOptions {
  path: string;
  guard: Type<CanActivate> | null;
  readOnly: boolean;
  showPayloads: boolean;
  routeMetadata: Readonly<Record<string, unknown>>;
  allowedOrigins: ReadonlySet<string>;
  showStacks: boolean;
}

const DASHBOARD_OPTION_KEYS: readonly string[] = [
  'path',
  'guard',
  'allowAnonymous',
  'readOnly',
  'showPayloads',
  'routeMetadata',
  'allowedOrigins',
  'showStacks',
];
/** URL path segments of unreserved characters only: no `..`, query, fragment or route pattern syntax. */
const PATH_PATTERN = /^(?!.*(?:^|\/)\.{1,2}(?:\/|$))[A-Za-z0-9._~-]+(?:\/[A-Za-z0-9._~-]+)*$/;

/** Checks `forRoot`'s options; without a guard the dashboard refuses to exist unless anonymity was asked for. */
export function resolveDashboardOptions(options: JobsDashboardOptions = {}): ResolvedDashboardOptions {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError('options', options, 'must be an object');
  }
  const unknown = Object.keys(options).find((key) => !DASHBOARD_OPTION_KEYS.includes(key));
  if (unknown !== undefined) {
    const given = (options as Record<string, unknown>)[unknown];
    throw new InvalidOptionError(unknown, given, `is not a dashboard option (${DASHBOARD_OPTION_KEYS.join(', ')})`);
  }
  const { path = 'jobs', guard, allowAnonymous = false, readOnly = false, showPayloads = false } = options;
  const { showStacks = false } = options;
  for (const [name, value] of Object.entries({ allowAnonymous, readOnly, showPayloads, showStacks })) {
    if (typeof value !== 'boolean') throw new InvalidOptionError(name, value, 'must be a boolean');
  }
  if (guard !== undefined && typeof guard !== 'function') {
    throw new InvalidOptionError('guard', guard, 'must be a CanActivate class (resolved through DI)');
  }
  if (guard === undefined && !allowAnonymous) throw new DashboardGuardRequiredError();
  const trimmed = typeof path === 'string' ? path.replace(/^\/+|\/+$/g, '') : path;
  if (typeof trimmed !== 'string' || !PATH_PATTERN.test(trimmed)) {
    throw new InvalidOptionError(
      'path',
      path,
      'must be a non-empty URL path of letters, digits, ".", "_", "~" and "-"',
    );
  }
  return {
    path: trimmed,
    guard: guard ?? null,
    readOnly,
    showPayloads,
    showStacks,
    routeMetadata: resolveRouteMetadata(options.routeMetadata),
    allowedOrigins: resolveAllowedOrigins(options.allowedOrigins),
  };
}
