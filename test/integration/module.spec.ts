import { afterEach, describe, expect, it } from '@jest/globals';
import { type DynamicModule, Global, Injectable, Module, type OnModuleInit, Scope, type Type } from '@nestjs/common';
import { getConnectionToken, MongooseModule } from '@nestjs/mongoose';
import { Test } from '@nestjs/testing';
import mongoose, { type Connection } from 'mongoose';
import {
  DuplicateJobHandlerError,
  InvalidOptionError,
  JobHandler,
  JobsModule,
  type JobsModuleExtras,
  JobsModuleImportedTwiceError,
  type JobsModuleOptions,
  type JobsOptionsFactory,
  JobsService,
  MongooseConnectionMissingError,
  RequestScopedJobHandlerError,
  UnknownJobError,
} from '../../lib';
import { JOBS_RESOLVED_OPTIONS } from '../../lib/model/jobs.constants';
import type { ResolvedJobsOptions } from '../../lib/model/jobs.options';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

let handled = 0;

@Injectable()
class Handlers {
  @JobHandler('ping')
  ping() {
    handled += 1;
  }
}

@Injectable()
class OtherHandlers {
  @JobHandler('ping')
  alsoPing() {}
}

@Injectable({ scope: Scope.REQUEST })
class RequestScopedHandlers {
  @JobHandler('request-scoped')
  run() {}
}

@Injectable()
class JobsConfig implements JobsOptionsFactory {
  createJobsOptions(): JobsModuleOptions {
    return { collectionName: 'class_jobs', pollIntervalMs: 30 };
  }
}

@Module({ providers: [JobsConfig], exports: [JobsConfig] })
class ConfigModule {}

describe('JobsModule', () => {
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });

  async function boot(
    jobsModule: Parameters<typeof createJobsTestApp>[0]['jobsModule'],
    providers: Type<unknown>[] = [Handlers],
  ) {
    const app = await createJobsTestApp({ dbName: uniqueDatabaseName('module'), jobsModule, providers });
    apps.push(app);
    return app;
  }

  async function runsAJob(app: JobsTestApp) {
    const before = handled;
    const job = await app.jobs.enqueue('ping');
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'completed', 'ping completed');
    expect(handled).toBe(before + 1);
  }

  const optionsOf = (app: JobsTestApp) => app.module.get<ResolvedJobsOptions>(JOBS_RESOLVED_OPTIONS);

  it('forRoot() with no options uses the documented defaults', async () => {
    const app = await boot(JobsModule.forRoot());
    expect(optionsOf(app)).toMatchObject({
      collectionName: 'jobs',
      worker: true,
      concurrency: 4,
      pollIntervalMs: 1000,
      leaseMs: 30_000,
      heartbeatIntervalMs: 10_000,
      shutdownGraceMs: 10_000,
      maxAttempts: 5,
      backoff: { baseMs: 1000, maxMs: 900_000 },
    });
    expect(optionsOf(app).workerId).toMatch(/^.+:\d+:[0-9a-f]{6}$/);
  });

  it('forRoot(options) merges options with the defaults', async () => {
    const app = await boot(JobsModule.forRoot({ pollIntervalMs: 25, leaseMs: 900, collectionName: 'my_jobs' }));
    expect(optionsOf(app)).toMatchObject({
      pollIntervalMs: 25,
      leaseMs: 900,
      heartbeatIntervalMs: 300,
      concurrency: 4,
    });
    await runsAJob(app);
    expect(await app.connection.collection('my_jobs').countDocuments()).toBe(1);
  });

  it('forRootAsync({ useFactory, inject, imports })', async () => {
    const app = await boot(
      JobsModule.forRootAsync({
        imports: [ConfigModule],
        inject: [JobsConfig],
        useFactory: async (config: JobsConfig) => ({ ...config.createJobsOptions(), concurrency: 2 }),
      }),
    );
    expect(optionsOf(app)).toMatchObject({ collectionName: 'class_jobs', concurrency: 2 });
    await runsAJob(app);
  });

  it('forRootAsync({ useClass })', async () => {
    const app = await boot(JobsModule.forRootAsync({ useClass: JobsConfig }));
    expect(optionsOf(app)).toMatchObject({ collectionName: 'class_jobs', pollIntervalMs: 30 });
    await runsAJob(app);
  });

  it('forRootAsync({ useExisting })', async () => {
    const app = await boot(JobsModule.forRootAsync({ imports: [ConfigModule], useExisting: JobsConfig }));
    expect(optionsOf(app)).toMatchObject({ collectionName: 'class_jobs' });
    await runsAJob(app);
  });

  it('fails bootstrap on a duplicate job name, naming both Class.method sites', async () => {
    const error = await boot(JobsModule.forRoot(), [Handlers, OtherHandlers]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DuplicateJobHandlerError);
    expect((error as Error).message).toContain('Handlers.ping');
    expect((error as Error).message).toContain('OtherHandlers.alsoPing');
  });

  it('fails bootstrap on a @JobHandler in a request-scoped provider, saying what to do', async () => {
    const error = await boot(JobsModule.forRoot(), [Handlers, RequestScopedHandlers]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RequestScopedJobHandlerError);
    expect((error as Error).message).toContain("@JobHandler('request-scoped') on RequestScopedHandlers.run");
    expect((error as Error).message).toContain('ModuleRef.resolve');
  });

  it('fails bootstrap when JobsModule.forRoot is imported twice in one application', async () => {
    @Module({ imports: [JobsModule.forRoot({ concurrency: 1 })] })
    class FeatureModule {}
    const error = await createJobsTestApp({
      dbName: uniqueDatabaseName('module'),
      imports: [FeatureModule as unknown as DynamicModule],
      providers: [Handlers],
    }).then(
      (app) => apps.push(app),
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(JobsModuleImportedTwiceError);
    expect((error as Error).message).toContain('Import JobsModule.forRoot() once');
  });

  it('still allows several applications in one process', async () => {
    const [first, second] = await Promise.all([boot(JobsModule.forRoot()), boot(JobsModule.forRoot())]);
    await runsAJob(first);
    await runsAJob(second);
  });

  it.each<[string, boolean, JobsModuleExtras, string]>([
    ['without MongooseModule.forRoot()', false, {}, 'MongooseModule.forRoot(uri)'],
    [
      'with an unknown connectionName',
      true,
      { connectionName: 'reports' },
      "MongooseModule.forRoot(uri, { connectionName: 'reports' })",
    ],
  ])('fails bootstrap %s with a hint naming MongooseModule.forRoot()', async (_label, withMongoose, extras, hint) => {
    const connectionsBefore = new Set(mongoose.connections);
    const imports = withMongoose
      ? [MongooseModule.forRoot(testMongoUri(), { dbName: uniqueDatabaseName('module') })]
      : [];
    const error = await Test.createTestingModule({ imports: [...imports, JobsModule.forRoot(extras)] })
      .compile()
      .then(
        (module) => module.close(),
        (e: unknown) => e,
      );
    await Promise.all(mongoose.connections.filter((c) => !connectionsBefore.has(c)).map((c) => c.close()));
    expect(error).toBeInstanceOf(MongooseConnectionMissingError);
    expect((error as Error).message).toContain(hint);
  });

  it('rejects a per-handler leaseMs shorter than the module leaseMs at bootstrap', async () => {
    @Injectable()
    class ShortLease {
      @JobHandler('short-lease', { leaseMs: 500 })
      run() {}
    }
    const error = await boot(JobsModule.forRoot({ leaseMs: 1000 }), [ShortLease]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as Error).message).toContain("@JobHandler('short-lease').leaseMs on ShortLease.run");
    expect((error as Error).message).toContain("lower the module's leaseMs and raise it per handler");
  });

  it('validates names and applies handler options for jobs enqueued before JobsModule finished bootstrapping', async () => {
    @Injectable()
    class EarlyHandlers {
      @JobHandler('early', { maxAttempts: 2 })
      run() {}
    }
    const outcomes: unknown[] = [];
    @Injectable()
    class EarlyProducer implements OnModuleInit {
      constructor(private readonly jobs: JobsService) {}
      async onModuleInit() {
        outcomes.push(await this.jobs.enqueue('early', {}, { delayMs: 3_600_000 }).catch((e: unknown) => e));
        outcomes.push(await this.jobs.enqueue('misspelled').catch((e: unknown) => e));
      }
    }
    // Global modules run their hooks first, in import order: this producer's onModuleInit precedes JobsModule's.
    @Global()
    @Module({ providers: [EarlyProducer, EarlyHandlers] })
    class CoreModule {}
    const dbName = uniqueDatabaseName('module');
    const module = await Test.createTestingModule({
      imports: [MongooseModule.forRoot(testMongoUri(), { dbName }), CoreModule, JobsModule.forRoot()],
    }).compile();
    module.useLogger(false);
    await module.init();
    await module.close();
    expect(outcomes[0]).toMatchObject({ name: 'early', maxAttempts: 2 });
    expect(outcomes[1]).toBeInstanceOf(UnknownJobError);
  });

  it('still fails bootstrap when an early enqueue hit a duplicate job name and its caller swallowed the error', async () => {
    let swallowed: unknown;
    @Injectable()
    class SwallowingProducer implements OnModuleInit {
      constructor(private readonly jobs: JobsService) {}
      async onModuleInit() {
        swallowed = await this.jobs.enqueue('ping').catch((e: unknown) => e);
      }
    }
    @Global()
    @Module({ providers: [SwallowingProducer, Handlers, OtherHandlers] })
    class CoreModule {}
    const dbName = uniqueDatabaseName('module');
    const module = await Test.createTestingModule({
      imports: [MongooseModule.forRoot(testMongoUri(), { dbName }), CoreModule, JobsModule.forRoot()],
    }).compile();
    module.useLogger(false);
    const booted = await module.init().catch((e: unknown) => e);
    // NestJS 11's close() awaits the failed initialization and rethrows its error before any hook runs (12 goes on):
    // then the connection it leaves open is closed here.
    await module.close().catch(() => module.get<Connection>(getConnectionToken()).close());
    expect(swallowed).toBeInstanceOf(DuplicateJobHandlerError);
    expect(booted).toBeInstanceOf(DuplicateJobHandlerError);
  });

  it.each<[JobsModuleOptions, string]>([
    [{ concurrency: 1.5 }, 'concurrency'],
    [{ concurrency: 0 }, 'concurrency'],
    [{ leaseMs: Number.NaN }, 'leaseMs'],
    [{ leaseMs: -1 }, 'leaseMs'],
    [{ pollIntervalMs: Number.POSITIVE_INFINITY }, 'pollIntervalMs'],
    [{ leaseMs: 1000, heartbeatIntervalMs: 1000 }, 'heartbeatIntervalMs'],
    [{ maxAttempts: 0 }, 'maxAttempts'],
    [{ backoff: { baseMs: 0 } }, 'backoff.baseMs'],
    [{ shutdownGraceMs: -5 }, 'shutdownGraceMs'],
    [{ pollIntervalMs: 2 ** 31 }, 'pollIntervalMs'],
    [{ leaseMs: 1e300 }, 'leaseMs'],
  ])('rejects invalid options %j at bootstrap, naming %s', async (options, name) => {
    const error = await boot(JobsModule.forRoot(options)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as InvalidOptionError).option).toBe(name);
    expect((error as Error).message).toContain(`Invalid option ${name}`);
  });

  it('rejects invalid handler options at bootstrap, naming the handler', async () => {
    @Injectable()
    class BadHandler {
      @JobHandler('bad', { concurrency: -1 })
      run() {}
    }
    const error = await boot(JobsModule.forRoot(), [BadHandler]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as Error).message).toContain("@JobHandler('bad').concurrency on BadHandler.run");
  });

  it.each([[''], ['   '], [42]])('rejects the handler name %j at bootstrap', async (name) => {
    @Injectable()
    class BadName {
      @JobHandler(name as string)
      run() {}
    }
    const error = await boot(JobsModule.forRoot(), [BadName]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as Error).message).toContain('@JobHandler name on BadName.run');
  });
});
