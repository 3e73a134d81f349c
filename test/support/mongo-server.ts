import { startJavaServer } from './java-server';

export type MongoServerKind = 'MONGODB_URI' | 'mongodb-memory-server' | 'mongo-java-server';

export interface TestMongoServer {
  kind: MongoServerKind;
  /** Connection string without a database name. */
  uri: string;
  /** A line for logs: which server, and where. */
  description: string;
  stop(): Promise<void>;
}

const MEMORY_SERVER_TIMEOUT_MS = 60_000;

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** An error's message on one line (download errors put their cause on a second line). */
function oneLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.replace(/\s*\n\s*/g, ' ').trim();
}

/**
 * mongodb-memory-server, when it can provide a binary; otherwise one log line and `undefined`. The binary is
 * looked up (and downloaded) first, on its own: `MongoMemoryServer.create` prints a multi-line warning with
 * a stack trace to stderr when it fails, which is noise when the only problem is that no binary is available.
 */
export async function startMemoryServer(log: (line: string) => void): Promise<TestMongoServer | undefined> {
  const { MongoBinary, MongoMemoryServer } = await import('mongodb-memory-server');
  try {
    await withTimeout(MongoBinary.getPath(), MEMORY_SERVER_TIMEOUT_MS, 'the MongoDB binary download');
  } catch (error) {
    log(`mongodb-memory-server: no MongoDB binary (${oneLine(error)}); trying the in-memory Java test server`);
    return undefined;
  }
  try {
    const server = await withTimeout(MongoMemoryServer.create(), MEMORY_SERVER_TIMEOUT_MS, 'mongodb-memory-server');
    const uri = server.getUri();
    return {
      kind: 'mongodb-memory-server',
      uri,
      description: `mongodb-memory-server (${uri})`,
      stop: async () => {
        await server.stop();
      },
    };
  } catch (error) {
    log(`mongodb-memory-server could not start its binary (${oneLine(error)}); trying the in-memory Java test server`);
    return undefined;
  }
}

/**
 * Resolves a MongoDB wire server in the documented order:
 * MONGODB_URI, then a mongodb-memory-server binary, then the in-memory Java test server.
 */
export async function startTestMongoServer(log: (line: string) => void): Promise<TestMongoServer> {
  const explicit = process.env.MONGODB_URI;
  if (explicit) {
    return {
      kind: 'MONGODB_URI',
      uri: explicit,
      description: `MONGODB_URI (${redact(explicit)})`,
      stop: async () => {},
    };
  }
  const memory = await startMemoryServer(log);
  if (memory) return memory;
  return startJavaTestServer();
}

/** One in-memory Java test server (`test/support/java-server/`). */
export async function startJavaTestServer(): Promise<TestMongoServer> {
  const java = await startJavaServer();
  return {
    kind: 'mongo-java-server',
    uri: java.uri,
    description: `mongo-java-server 1.47 in-memory, wire version 21 (${java.uri}, pid ${java.pid})`,
    stop: () => java.stop(),
  };
}

function redact(uri: string): string {
  return uri.replace(/\/\/[^@/]*@/, '//***@');
}
