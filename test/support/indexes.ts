import { waitFor } from './jobs-app';

/** The index options the tests use (plain, so that both the driver's and mongoose's driver types accept them). */
export interface TestIndexOptions {
  name: string;
  unique?: boolean;
  sparse?: boolean;
}

/** What `createIndexReady` needs of a collection: the driver's, or mongoose's (which forwards to it). */
interface IndexedCollection {
  createIndex(keys: Record<string, 1 | -1>, options: TestIndexOptions): Promise<string>;
  listIndexes(): { toArray(): Promise<{ name?: unknown }[]> };
}

/**
 * Creates an index, then resolves once the server lists it as built. A test that relies on the index (a unique one
 * refusing a write) must not assume `createIndex` answers only after that: some engines (DocumentDB) build in the
 * background, and a build in progress is not listed.
 */
export async function createIndexReady(
  collection: IndexedCollection,
  keys: Record<string, 1 | -1>,
  options: TestIndexOptions,
): Promise<void> {
  await collection.createIndex(keys, options);
  await waitFor(
    async () => (await collection.listIndexes().toArray()).some((index) => index.name === options.name),
    `index ${options.name} to be listed`,
  );
}
