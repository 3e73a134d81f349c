/** Resolves what `load` imports, or null when it cannot be imported (an optional peer that is not installed). */
export async function importOptional<T>(load: () => Promise<T>): Promise<T | null> {
  try {
    return await load();
  } catch {
    return null;
  }
}
