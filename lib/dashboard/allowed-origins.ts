import { InvalidOptionError } from '../model/errors/invalid-option.error.js';

/**
 * Checks `allowedOrigins`: each entry an `http(s)://host[:port]` origin spelt exactly as a browser sends it in
 * `Origin` (lower-case host, no default port, no path or trailing slash), since requests are matched by equality.
 */
export function resolveAllowedOrigins(origins: unknown = []): ReadonlySet<string> {
  if (!Array.isArray(origins)) {
    throw new InvalidOptionError(
      'allowedOrigins',
      origins,
      "must be an array of origins such as 'https://admin.example.com'",
    );
  }
  for (const origin of origins) {
    const serialized = serializedOrigin(origin);
    if (serialized !== origin) {
      const hint = serialized ? ` (did you mean '${serialized}'?)` : '';
      throw new InvalidOptionError(
        'allowedOrigins',
        origin,
        `must list origins as a browser sends them: http(s)://host[:port], nothing else${hint}`,
      );
    }
  }
  return new Set(origins as string[]);
}

/** The origin `value` names, as browsers serialize it, or null when it is not an http(s) URL. */
function serializedOrigin(value: unknown): string | null {
  if (typeof value !== 'string' || !URL.canParse(value)) return null;
  const url = new URL(value);
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : null;
}
