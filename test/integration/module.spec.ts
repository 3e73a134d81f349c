import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable, Module, Scope, type Type } from '@nestjs/common';
import {
  DuplicateJobHandlerError,
  InvalidOptionError,
  JobHandler,
  JobsModule,
  type JobsModuleOptions,
  type JobsOptionsFactory,
} from '../../lib';
import { JOBS_RESOLVED_OPTIONS } from '../../lib/jobs.constants';
import type { ResolvedJobsOptions } from '../../lib/jobs.options';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

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

  it('skips request-scoped providers instead of registering them', async () => {
    const app = await boot(JobsModule.forRoot({ pollIntervalMs: 20 }), [Handlers, RequestScopedHandlers]);
    await expect(app.jobs.enqueue('request-scoped')).rejects.toThrow('No @JobHandler is registered');
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
