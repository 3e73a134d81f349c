/** Stops the server that global setup started (a no-op for MONGODB_URI). */
export default async function globalTeardown(): Promise<void> {
  await globalThis.__JOBS_TEST_MONGO__?.stop();
  globalThis.__JOBS_TEST_MONGO__ = undefined;
}
