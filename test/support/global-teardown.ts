/** Stops the servers that global setup started (a no-op for MONGODB_URI). */
export default async function globalTeardown(): Promise<void> {
  const servers = globalThis.__JOBS_TEST_MONGO__ ?? [];
  globalThis.__JOBS_TEST_MONGO__ = undefined;
  await Promise.all(servers.map((server) => server.stop()));
}
