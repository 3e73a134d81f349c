/**
 * Resolves after `ms` milliseconds. For pacing only (spacing writes, letting a loop poll once more): a test that
 * needs something to have happened waits for it with `waitFor`, never for a fixed time.
 */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
