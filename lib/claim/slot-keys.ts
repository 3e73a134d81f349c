/**
 * The values of a job row's slot fields. Each is JSON of an array, so that a name or group holding any character
 * cannot make one key pass for another's, and every group slot of a name shares one prefix (`groupSlotPrefix`).
 */

/** Slot `index` of a name's `globalConcurrency` (0 ≤ index < limit). */
export function concurrencySlotKey(name: string, index: number): string {
  return JSON.stringify([name, index]);
}

/** The `limit` slot keys of a name's `globalConcurrency`. */
export function concurrencySlotKeys(name: string, limit: number): string[] {
  return Array.from({ length: limit }, (_, index) => concurrencySlotKey(name, index));
}

/** Slot `index` of one group of a name's `groupConcurrency`. */
export function groupSlotKey(name: string, group: string, index: number): string {
  return JSON.stringify([name, group, index]);
}

/**
 * What every slot key of `name` starts with, `["<name>",`: its holders are one range of each slot index, and no key
 * of another name shares it (the name's JSON string is closed by its quote).
 */
export function slotPrefix(name: string): string {
  return `${JSON.stringify([name]).slice(0, -1)},`;
}

/** The group and index a group slot key of `name` stands for. */
export function parseGroupSlotKey(key: string): { group: string; index: number } {
  const [, group, index] = JSON.parse(key) as [string, string, number];
  return { group, index };
}
