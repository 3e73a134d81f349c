import { randomBytes } from 'node:crypto';
import type { DynamicModule, INestApplicationContext, Provider } from '@nestjs/common';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MongooseModule } from '@nestjs/mongoose';
import { type Collection, type CommandStartedEvent, type Db, MongoClient, ObjectId } from 'mongodb';
import { JobsModule, type JobsModuleOptions } from '../../lib';
import type { JobDocument } from '../../lib/model/job-document';
import { createJobSchema } from '../../lib/persistence/job.schema';

/** Everything the scenarios share: the server's URI and one raw driver client for setup and cleanup. */
export interface BenchContext {
  uri: string;
  client: MongoClient;
}

export async function createBenchContext(uri: string): Promise<BenchContext> {
  return { uri, client: await MongoClient.connect(uri) };
}

/** A database name no other scenario (or concurrent test run) uses. */
export function benchDbName(label: string): string {
  return `bench_${label}_${randomBytes(3).toString('hex')}`;
}

@Module({})
class BenchAppModule {
  static forRoot(
    uri: string,
    dbName: string,
    options: JobsModuleOptions,
    providers: Provider[],
    monitorCommands: boolean,
  ): DynamicModule {
    return {
      module: BenchAppModule,
      imports: [MongooseModule.forRoot(uri, { dbName, monitorCommands }), JobsModule.forRoot(options)],
      providers,
    };
  }
}

/**
 * A real Nest application context, as a user's app would boot it: MongooseModule + JobsModule.forRoot + handler
 * providers. `init()` runs inside `createApplicationContext`, so a worker's poll loop is running on return.
 */
export async function createBenchApp(
  uri: string,
  dbName: string,
  options: JobsModuleOptions,
  providers: Provider[] = [],
  { monitorCommands = false } = {},
): Promise<INestApplicationContext> {
  const module = BenchAppModule.forRoot(uri, dbName, options, providers, monitorCommands);
  return NestFactory.createApplicationContext(module, {
    // Errors stay visible (a failing claim would otherwise look like a slow one); the rest is noise here.
    logger: process.env.BENCH_NEST_LOGS ? ['log', 'warn', 'error'] : ['error'],
    abortOnError: false,
  });
}

/**
 * Counts the commands a client sends, by kind: the server-side cost of a job is mostly how many round trips it
 * takes. `findAndModify` is split by what it looks for (a pending row, a running row, one row by _id).
 */
export class CommandCounter {
  private counts = new Map<string, number>();
  private active = false;

  constructor(client: MongoClient) {
    client.on('commandStarted', (event: CommandStartedEvent) => {
      if (!this.active) return;
      const key = commandKind(event);
      this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
    });
  }

  start(): void {
    this.counts.clear();
    this.active = true;
  }

  /** Commands per job while active, by kind. */
  stop(jobs: number): Record<string, number> {
    this.active = false;
    const perJob: Record<string, number> = {};
    for (const [kind, count] of [...this.counts].sort()) perJob[kind] = Math.round((count / jobs) * 1000) / 1000;
    return perJob;
  }
}

function commandKind(event: CommandStartedEvent): string {
  if (event.commandName !== 'findAndModify') return event.commandName;
  const query = (event.command.query ?? {}) as Record<string, unknown>;
  if (query._id !== undefined) return 'findAndModify(_id)';
  return typeof query.status === 'string' ? `findAndModify(${query.status})` : 'findAndModify';
}

/** The library's own index definitions, so raw-driver baselines use exactly the same collection shape. */
export async function createJobIndexes(collection: Collection): Promise<void> {
  for (const [fields, options] of createJobSchema(collection.collectionName).indexes()) {
    await collection.createIndex(fields as Record<string, 1 | -1>, options as Record<string, unknown>);
  }
}

/** A pending, due row shaped like the ones `JobsService.enqueue` writes. */
export function pendingJobDoc(name: string, payload: unknown, at = new Date()): JobDocument {
  return {
    _id: new ObjectId(),
    name,
    payload,
    status: 'pending',
    runAt: at,
    priority: 0,
    attemptCount: 0,
    maxAttempts: 5,
    attempts: [],
    fencingToken: 0,
    createdAt: at,
    updatedAt: at,
  } as unknown as JobDocument;
}

/**
 * A pending row that already failed `attempts` times (kept in its history, each attempt with an 8 KB stack, the shape
 * of a Node.js error's): `pendingJobDoc` when `attempts` is 0.
 */
export function retriedJobDoc(name: string, payload: unknown, attempts: number): JobDocument {
  const doc = pendingJobDoc(name, payload);
  if (attempts === 0) return doc;
  const frames = '    at handler (/app/dist/jobs/handler.js:1:1)\n'.repeat(180);
  const history = Array.from({ length: attempts }, (_, i) => ({
    at: new Date(doc.createdAt.getTime() + i),
    error: `attempt ${i + 1} failed`,
    errorClass: 'Error',
    stack: `Error: attempt ${i + 1} failed\n${frames}`,
  }));
  return { ...doc, attemptCount: attempts, maxAttempts: attempts + 5, attempts: history } as unknown as JobDocument;
}

/** Inserts `count` due pending rows in unordered batches (fast setup for deep queues). */
export async function insertPendingJobs(collection: Collection, name: string, count: number): Promise<void> {
  const batchSize = 5_000;
  // Spread runAt over the past so the claim sort has real work to do, all of it due.
  const base = Date.now() - count;
  for (let offset = 0; offset < count; offset += batchSize) {
    const docs = [];
    for (let i = offset; i < Math.min(count, offset + batchSize); i += 1) {
      docs.push(pendingJobDoc(name, { i }, new Date(base + i)));
    }
    await collection.insertMany(docs as never[], { ordered: false });
  }
}

export async function dropDatabase(db: Db): Promise<void> {
  await db.dropDatabase().catch(() => undefined);
}

/** Server facts for the report: kind comes from the resolver, version and wire version from the server. */
export async function serverFacts(client: MongoClient): Promise<Record<string, unknown>> {
  const admin = client.db('admin');
  const build = await admin.command({ buildInfo: 1 }).catch((error: Error) => ({ error: error.message }));
  // `hello` is newer than some test servers; the legacy `isMaster` answers the same question.
  const hello = await admin
    .command({ hello: 1 })
    .catch(() => admin.command({ isMaster: 1 }))
    .catch((error: Error) => ({ error: error.message }));
  return {
    version: (build as { version?: string }).version ?? null,
    maxWireVersion: (hello as { maxWireVersion?: number }).maxWireVersion ?? null,
    setName: (hello as { setName?: string }).setName ?? null,
  };
}
