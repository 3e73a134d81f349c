import { randomBytes } from 'node:crypto';
import { MongoClient } from 'mongodb';
import mongoose, { type Connection } from 'mongoose';

/**
 * The server global setup resolved for this jest worker: its own when setup started one per worker, else the shared
 * one (worker 1, `--runInBand`, `MONGODB_URI`).
 */
export function testMongoUri(): string {
  const uri = process.env[`JOBS_TEST_MONGO_URI_${process.env.JEST_WORKER_ID}`] ?? process.env.JOBS_TEST_MONGO_URI;
  if (!uri) throw new Error('JOBS_TEST_MONGO_URI is not set: run the tests through `npm test` (jest global setup).');
  return uri;
}

/** A database name unique to one test file (or one test), so files can run in parallel. */
export function uniqueDatabaseName(label: string): string {
  const safe = label.replace(/[^a-zA-Z0-9]/g, '_').slice(0, 30);
  return `t_${safe}_${randomBytes(4).toString('hex')}`;
}

/** A raw driver client on the test server. */
export async function connectTestClient(options: { maxPoolSize?: number } = {}): Promise<MongoClient> {
  return MongoClient.connect(testMongoUri(), { maxPoolSize: options.maxPoolSize ?? 10 });
}

/** A dedicated mongoose connection to a fresh database; drop it with `dropTestConnection`. */
export async function createTestConnection(label: string): Promise<Connection> {
  return mongoose.createConnection(testMongoUri(), { dbName: uniqueDatabaseName(label) }).asPromise();
}

export async function dropTestConnection(connection: Connection): Promise<void> {
  await connection.dropDatabase().catch(() => undefined);
  await connection.close();
}
