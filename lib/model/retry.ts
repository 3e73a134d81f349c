/**
 * Runs `attempt` until it resolves, waiting `delaysMs[i]` after the i-th failure; rethrows the last error.
 * Only for operations that are safe to repeat (every execution write is fenced by its owner, so it is).
 */
export async function retryWithDelays<T>(attempt: () => Promise<T>, delaysMs: readonly number[]): Promise<T> {
  for (let failures = 0; ; failures += 1) {
    try {
      return await attempt();
    } catch (error) {
      if (failures >= delaysMs.length) throw error;
      await new Promise((resolve) => setTimeout(resolve, delaysMs[failures]));
    }
  }
}
