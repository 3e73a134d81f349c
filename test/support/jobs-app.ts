import type { DynamicModule, Provider, Type } from '@nestjs/common';
import { getConnectionToken, MongooseModule, type MongooseModuleOptions } from '@nestjs/mongoose';
import { Test, type TestingModule } from '@nestjs/testing';
import mongoose, { type Connection } from 'mongoose';
import { JobsModule, type JobsModuleOptions, JobsService } from '../../lib';
import { JobAdminStore } from '../../lib/persistence/job-admin.store';
import { JobClaimStore } from '../../lib/persistence/job-claim.store';
import { JobEnqueueStore } from '../../lib/persistence/job-enqueue.store';
import { JobIndexStore } from '../../lib/persistence/job-index.store';
import { JobLeaseStore } from '../../lib/persistence/job-lease.store';
import { JobOutcomeStore } from '../../lib/persistence/job-outcome.store';
import { JobReadStore } from '../../lib/persistence/job-read.store';
import { JobRetentionStore } from '../../lib/persistence/job-retention.store';
import { sleep } from './sleep';
import { testMongoUri } from './test-database';

export interface JobsTestApp {
  module: TestingModule;
  jobs: JobsService;
  /** The app's own store instances: tests wrap a method of one to hold or fail the writes of one step. */
  stores: JobStores;
  connection: Connection;
  get<T>(type: Type<T>): T;
  close(): Promise<void>;
}

/** The jobs collection's stores, one per step of a job's flow. */
export interface JobStores {
  index: JobIndexStore;
  enqueue: JobEnqueueStore;
  claim: JobClaimStore;
  lease: JobLeaseStore;
  outcome: JobOutcomeStore;
  admin: JobAdminStore;
  retention: JobRetentionStore;
  read: JobReadStore;
}

export interface JobsTestAppOptions {
  /** Database shared by the apps of one test (two apps on one database = two workers). */
  dbName: string;
  /** Server to connect to (e.g. a TcpProxy's uri). @default the test server */
  uri?: string;
  /** Extra `MongooseModule.forRoot` options (e.g. a `connectionFactory` that breaks the network after connecting). */
  mongoose?: Omit<MongooseModuleOptions, 'dbName'>;
  options?: JobsModuleOptions;
  /** Replaces `JobsModule.forRoot(options)`, e.g. with a forRootAsync variant. */
  jobsModule?: DynamicModule;
  providers?: Provider[];
  controllers?: Type<unknown>[];
  imports?: DynamicModule[];
}

/** A real Nest application context: real mongoose connection, real JobsModule, the given handler providers. */
export async function createJobsTestApp(setup: JobsTestAppOptions): Promise<JobsTestApp> {
  const connectionsBefore = new Set(mongoose.connections);
  try {
    return await bootJobsTestApp(setup);
  } catch (error) {
    // A bootstrap that fails (on purpose, in tests of bad options) leaves its connection open; close it.
    await Promise.all(mongoose.connections.filter((c) => !connectionsBefore.has(c)).map((c) => c.close()));
    throw error;
  }
}

async function bootJobsTestApp(setup: JobsTestAppOptions): Promise<JobsTestApp> {
  const module = await Test.createTestingModule({
    imports: [
      MongooseModule.forRoot(setup.uri ?? testMongoUri(), { ...setup.mongoose, dbName: setup.dbName }),
      setup.jobsModule ?? JobsModule.forRoot({ pollIntervalMs: 50, ...setup.options }),
      ...(setup.imports ?? []),
    ],
    providers: setup.providers ?? [],
    controllers: setup.controllers ?? [],
  }).compile();
  module.useLogger(process.env.JOBS_TEST_LOGS ? ['log', 'warn', 'error'] : false);
  await module.init().catch(async (error: unknown) => {
    await module.close();
    throw error;
  });
  return {
    module,
    jobs: module.get(JobsService),
    stores: {
      index: module.get(JobIndexStore),
      enqueue: module.get(JobEnqueueStore),
      claim: module.get(JobClaimStore),
      lease: module.get(JobLeaseStore),
      outcome: module.get(JobOutcomeStore),
      admin: module.get(JobAdminStore),
      retention: module.get(JobRetentionStore),
      read: module.get(JobReadStore),
    },
    connection: module.get<Connection>(getConnectionToken()),
    get: (type) => module.get(type),
    close: () => module.close(),
  };
}

/** Resolves when `predicate` holds, polling every 10 ms; rejects with `what` after `timeoutMs`. */
export async function waitFor(
  predicate: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** A promise with its resolve exposed, for handlers that block until a test lets them go. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
