import { startTestMongoServer, type TestMongoServer } from './mongo-server';

declare global {
  // Shared between jest's global setup and teardown (same process).
  var __JOBS_TEST_MONGO__: TestMongoServer | undefined;
}

/** Starts (or adopts) the MongoDB wire server every test file connects to. */
export default async function globalSetup(): Promise<void> {
  const log = (line: string) => process.stdout.write(`[mongo] ${line}\n`);
  const server = await startTestMongoServer(log);
  globalThis.__JOBS_TEST_MONGO__ = server;
  process.env.JOBS_TEST_MONGO_URI = server.uri;
  process.env.JOBS_TEST_MONGO_KIND = server.kind;
  log(`using ${server.description}`);
}
