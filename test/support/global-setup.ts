import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { startJavaTestServer, startTestMongoServer, type TestMongoServer } from './mongo-server';
import { describeTestServer } from './server-capabilities';

declare global {
  // Shared between jest's global setup and teardown (same process).
  var __JOBS_TEST_MONGO__: TestMongoServer[] | undefined;
}

/**
 * Starts (or adopts) the MongoDB wire server the test files connect to. The in-memory Java test server runs one
 * command at a time, so two files timing short leases against one would slow each other down: then every further jest
 * worker (`maxWorkers`) gets a Java server of its own (`testMongoUri` picks it). A real server is shared.
 */
export default async function globalSetup(globalConfig: { maxWorkers: number; rootDir: string }): Promise<void> {
  process.stdout.write(`[nest] ${checkNestMajor(globalConfig.rootDir)}\n`);
  const log = (line: string) => process.stdout.write(`[mongo] ${line}\n`);
  const server = await startTestMongoServer(log);
  globalThis.__JOBS_TEST_MONGO__ = [server];
  process.env.JOBS_TEST_MONGO_URI = server.uri;
  process.env.JOBS_TEST_MONGO_KIND = server.kind;
  log(`using ${server.description}`);
  // A server of the user's (CI's matrix): say what it is, so a job's log shows the version and topology it ran on.
  if (server.kind === 'MONGODB_URI') log(`MONGODB_URI is ${await describeTestServer()}`);
  if (server.kind !== 'mongo-java-server') return;
  const workers = Array.from({ length: globalConfig.maxWorkers - 1 }, (_, index) => index + 2);
  const own = await Promise.all(workers.map(() => startJavaTestServer()));
  globalThis.__JOBS_TEST_MONGO__.push(...own);
  own.forEach((each, index) => {
    process.env[`JOBS_TEST_MONGO_URI_${workers[index]}`] = each.uri;
  });
  if (own.length > 0) log(`and one more for each further jest worker (${own.map((each) => each.uri).join(', ')})`);
}

/**
 * The NestJS packages installed must be NEST_MAJOR's (CI's matrix sets it; unset: the locked ones), or no test runs:
 * a job named "nest 11" never passes on NestJS 12. `scripts/use-nest-major.mjs --check` says which are installed.
 */
function checkNestMajor(rootDir: string): string {
  try {
    const script = join(rootDir, 'scripts', 'use-nest-major.mjs');
    return execFileSync(process.execPath, [script, '--check'], {
      cwd: rootDir,
      encoding: 'utf8',
      stdio: 'pipe',
    }).trim();
  } catch (error) {
    const { stderr } = error as { stderr?: string };
    throw new Error(stderr?.trim() || String(error));
  }
}
