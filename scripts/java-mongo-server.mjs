// The in-memory Java MongoDB wire server for scripts that run outside jest (scripts/check-consumers.mjs): the same
// server and jar cache as jest's global setup (test/support/java-server.ts, which this mirrors in plain Node).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { REPO_ROOT } from './pack-package.mjs';

const SERVER_DIR = join(REPO_ROOT, 'test', 'support', 'java-server');
const JAR_DIR = join(REPO_ROOT, '.cache', 'java-server', 'lib');
const READY_TIMEOUT_MS = 60_000;

/** Resolves mongo-java-server's jars from Maven Central into the cache, once. */
function ensureJars() {
  if (existsSync(JAR_DIR) && readdirSync(JAR_DIR).some((file) => file.startsWith('mongo-java-server-memory-backend'))) {
    return;
  }
  mkdirSync(JAR_DIR, { recursive: true });
  const mvn = spawnSync(
    'mvn',
    ['-q', '-B', '-f', join(SERVER_DIR, 'pom.xml'), 'dependency:copy-dependencies', `-DoutputDirectory=${JAR_DIR}`],
    { encoding: 'utf8' },
  );
  if (mvn.status !== 0) {
    throw new Error(
      `No MongoDB for the consumer apps: MONGODB_URI is not set and mvn could not fetch mongo-java-server ` +
        `(${mvn.error?.message ?? `exit ${mvn.status}`}). Set MONGODB_URI, or install Java 17+ and Maven.\n` +
        `${mvn.stdout ?? ''}${mvn.stderr ?? ''}`,
    );
  }
}

/**
 * Starts the server on a free loopback port; resolves to `{ uri, stop }`. The JVM exits when its stdin closes, so it
 * goes away with this process even on SIGKILL.
 */
export async function startJavaMongoServer() {
  ensureJars();
  const child = spawn(
    'java',
    ['-Xss1m', '-XX:+UseSerialGC', '-cp', `${JAR_DIR}/*`, join(SERVER_DIR, 'TestMongoServer.java')],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const port = await new Promise((resolvePort, reject) => {
    const timer = setTimeout(
      () => reject(new Error('mongo-java-server did not report READY in time')),
      READY_TIMEOUT_MS,
    );
    createInterface({ input: child.stdout }).on('line', (line) => {
      const match = /^READY (\d+)$/.exec(line.trim());
      if (match) {
        clearTimeout(timer);
        resolvePort(Number(match[1]));
      }
    });
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`mongo-java-server exited before it was ready (code ${code})`));
    });
  });
  const exited = new Promise((done) => child.once('exit', done));
  return {
    uri: `mongodb://127.0.0.1:${port}`,
    description: `mongo-java-server in-memory (127.0.0.1:${port}, pid ${child.pid})`,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.stdin.end();
      const killer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(killer);
    },
  };
}
