import { type ChildProcessByStdio, execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';

/** Where Maven copies the server's jars; git-ignored, reused across runs. */
const REPO_ROOT = resolve(process.cwd());
const SERVER_DIR = join(REPO_ROOT, 'test', 'support', 'java-server');
const JAR_DIR = join(REPO_ROOT, '.cache', 'java-server', 'lib');
const READY_TIMEOUT_MS = 60_000;

export interface JavaServerHandle {
  uri: string;
  pid: number;
  stop(): Promise<void>;
}

function hasCommand(command: string): boolean {
  try {
    execFileSync(command, ['-version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Resolves mongo-java-server and its dependencies from Maven Central into the cache once. */
export function ensureJavaServerJars(): string {
  const cached =
    existsSync(JAR_DIR) && readdirSync(JAR_DIR).some((f) => f.startsWith('mongo-java-server-memory-backend'));
  if (cached) return JAR_DIR;
  if (!hasCommand('java') || !hasCommand('mvn')) {
    throw new Error(
      'No MongoDB server for the tests: MONGODB_URI is not set, mongodb-memory-server could not provide a binary, ' +
        'and the in-memory Java fallback needs `java` (17+) and `mvn` on PATH. ' +
        'Install them (Debian: apt-get install openjdk-17-jdk-headless maven) or set MONGODB_URI to a running mongod.',
    );
  }
  mkdirSync(JAR_DIR, { recursive: true });
  // Maven's output is kept for a failure only: even `-q -B` prints stray colour codes on success.
  const mvn = spawnSync(
    'mvn',
    ['-q', '-B', '-f', join(SERVER_DIR, 'pom.xml'), 'dependency:copy-dependencies', `-DoutputDirectory=${JAR_DIR}`],
    { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' },
  );
  if (mvn.status !== 0) {
    throw new Error(
      `mvn could not fetch mongo-java-server into ${JAR_DIR} (exit ${mvn.status ?? mvn.signal}):\n${mvn.stdout}${mvn.stderr}`,
    );
  }
  return JAR_DIR;
}

/**
 * Starts the in-memory Java wire server on a free loopback port. The JVM watches its stdin and
 * exits when this process goes away, so it can never be orphaned (even on SIGKILL of the parent).
 */
export async function startJavaServer(): Promise<JavaServerHandle> {
  const jars = ensureJavaServerJars();
  const child: ChildProcessByStdio<Writable, Readable, null> = spawn(
    'java',
    ['-Xss1m', '-XX:+UseSerialGC', '-cp', `${jars}/*`, join(SERVER_DIR, 'TestMongoServer.java')],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const port = await new Promise<number>((resolvePort, reject) => {
    const timer = setTimeout(
      () => reject(new Error('mongo-java-server did not report READY in time')),
      READY_TIMEOUT_MS,
    );
    const lines = createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      const match = /^READY (\d+)$/.exec(line.trim());
      if (match) {
        clearTimeout(timer);
        resolvePort(Number(match[1]));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`mongo-java-server exited before it was ready (code ${code})`));
    });
  });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  return {
    uri: `mongodb://127.0.0.1:${port}`,
    pid: child.pid ?? -1,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.stdin.end();
      const killer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(killer);
    },
  };
}
