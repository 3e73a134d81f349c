/**
 * The indexed form of a dedupe key: unique per job name, not globally. One combined field under a unique sparse
 * index, because a compound `{ name, dedupeKey }` index would index every job (all have a name) and make keyless
 * jobs of one name collide on `dedupeKey: null`. JSON keeps it unambiguous whatever characters name and key hold.
 */
export function dedupeScope(name: string, dedupeKey: string): string {
  return JSON.stringify([name, dedupeKey]);
}
