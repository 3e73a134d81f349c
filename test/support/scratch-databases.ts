import { afterAll, beforeAll } from '@jest/globals';
import type { MongoClient } from 'mongodb';
import { connectTestClient } from './test-database';

/** A test file's own client and the databases its scenario runs create (each run its own), dropped at the end. */
export interface ScratchDatabases {
  /** The file's client (connected in `beforeAll`). */
  readonly client: MongoClient;
  /** The databases to drop: a scenario run pushes the name of each it creates. */
  readonly names: string[];
}

/**
 * Registers the `beforeAll` that connects a client and the `afterAll` that drops every database listed in `names`
 * and closes it. Call it at the top of a `describe`.
 */
export function scratchDatabases(): ScratchDatabases {
  let client: MongoClient | undefined;
  const names: string[] = [];
  beforeAll(async () => {
    client = await connectTestClient();
  });
  afterAll(async () => {
    for (const name of names) {
      await client
        ?.db(name)
        .dropDatabase()
        .catch(() => undefined);
    }
    await client?.close();
  });
  return {
    get client(): MongoClient {
      if (!client) throw new Error('scratchDatabases: the client is connected in beforeAll, not before');
      return client;
    },
    names,
  };
}
