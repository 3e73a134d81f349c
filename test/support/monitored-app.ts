import { afterEach, beforeEach } from '@jest/globals';
import type { MongoClient } from 'mongodb';
import type { Connection } from 'mongoose';
import { createJobsTestApp, type JobsTestApp } from './jobs-app';
import { TcpProxy } from './tcp-proxy';
import { connectTestClient, testMongoUri } from './test-database';

/** The driver timeouts of the chaos tests: a dead server is noticed within half a second. */
export const FAST_FAILING_DRIVER = { serverSelectionTimeoutMS: 500, heartbeatFrequencyMS: 500, connectTimeoutMS: 500 };

/**
 * An app (no worker) whose connection reports the name of every command it sends; through `uri` (a proxy) it fails
 * fast when the server is away.
 */
export async function monitoredApp(dbName: string, uri?: string): Promise<{ app: JobsTestApp; commands: string[] }> {
  const commands: string[] = [];
  const app = await createJobsTestApp({
    dbName,
    uri,
    options: { worker: false },
    mongoose: {
      ...(uri ? FAST_FAILING_DRIVER : {}),
      monitorCommands: true,
      connectionFactory: (connection: Connection) => {
        connection.getClient().on('commandStarted', (event) => commands.push(event.commandName));
        return connection;
      },
    },
  });
  return { app, commands };
}

/** Settles every promise and keeps each outcome (value or error), in order. */
export async function settleAll<T>(promises: Promise<T>[]): Promise<{ value?: T; error?: unknown }[]> {
  const settled = await Promise.allSettled(promises);
  return settled.map((s) => (s.status === 'fulfilled' ? { value: s.value } : { error: s.reason }));
}

/**
 * A fresh TCP proxy in front of the test server and a raw client, per test of the calling `describe` (registers its
 * `beforeEach`/`afterEach`): the proxy drops or delays what the app under test sends; the client, outside it,
 * prepares and reads rows. The database is dropped after each test.
 */
export function droppingProxyPerTest(dbName: string): { proxy: () => TcpProxy; client: () => MongoClient } {
  let proxy: TcpProxy;
  let client: MongoClient;
  beforeEach(async () => {
    proxy = await TcpProxy.start(testMongoUri());
    client = await connectTestClient({ maxPoolSize: 2 });
  });
  afterEach(async () => {
    proxy.setDelay(0);
    await proxy.close();
    await client.db(dbName).dropDatabase();
    await client.close();
  });
  return { proxy: () => proxy, client: () => client };
}
