/** Units of the schedule math, which works in whole seconds on epoch milliseconds. */
export const SECOND_MS = 1000;
export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

/** `ms` rounded down to a whole second: ticks and wall-clock readings are whole seconds. */
export function floorSecond(ms: number): number {
  return Math.floor(ms / SECOND_MS) * SECOND_MS;
}
