/**
 * The indexed form of a dedupe key: unique per job name, not globally. One combined field under a unique sparse
 * index, because a compound `{ name, dedupeKey }` index would index every job (all have a name) and make keyless
 * jobs of one name collide on `dedupeKey: null`. JSON keeps it unambiguous whatever characters name and key hold.
 */
export function dedupeScope(name: string, dedupeKey: string): string {
  return JSON.stringify([name, dedupeKey]);
}

/**
 * The indexed form of a throttle key: one job per name, key and window. The window's length is part of it, so two
 * callers throttling one key by different windows do not read each other's window numbers.
 */
export function throttleScope(name: string, key: string, windowMs: number, runAt: Date): string {
  return JSON.stringify([name, key, windowMs, Math.floor(runAt.getTime() / windowMs)]);
}

/** The indexed form of a debounce key: one pending job per name and key, the dedupe scope's form on its own field. */
export function debounceScope(name: string, key: string): string {
  return dedupeScope(name, key);
}
