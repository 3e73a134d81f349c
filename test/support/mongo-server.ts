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

async function tryMemoryServer(log: (line: string) => void): Promise<TestMongoServer | undefined> {
  try {
    const { MongoMemoryServer } = await import('mongodb-memory-server');
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
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    log(`mongodb-memory-server unavailable: ${reason}`);
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
  const memory = await tryMemoryServer(log);
  if (memory) return memory;
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
