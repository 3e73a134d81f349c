import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Body,
  Controller,
  ForbiddenException,
  Get,
  type INestApplication,
  Injectable,
  Module,
  Param,
  Post,
  type Provider,
  UseFilters,
} from '@nestjs/common';
import { APP_FILTER, ExternalContextCreator, NestFactory } from '@nestjs/core';
import { getConnectionToken, MongooseModule } from '@nestjs/mongoose';
import type { Connection } from 'mongoose';
import {
  type EnqueueOptions,
  InvalidJobIdError,
  JobHandler,
  JobsExceptionFilter,
  JobsModule,
  JobsService,
  JobTimeoutError,
  requireJob,
} from '../../lib';
import { createIndexReady } from '../support/indexes';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** A JSON answer: its status and body. */
interface Answer {
  status: number;
  body: Record<string, unknown>;
}

async function listen(
  app: INestApplication,
): Promise<(method: 'GET' | 'POST', path: string, body?: unknown) => Promise<Answer>> {
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  return async (method, path, body) => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };
}

@Injectable()
class Handlers {
  @JobHandler('report')
  async report(): Promise<void> {}
}

/** What an application writes: no try/catch, library errors become statuses through the filter. */
@Controller('jobs')
class JobsApiController {
  constructor(private readonly jobs: JobsService) {}

  @Post(':name')
  enqueue(@Param('name') name: string, @Body() body: { payload?: unknown; options?: EnqueueOptions }) {
    return this.jobs.enqueue(name, body.payload, body.options);
  }

  @Get(':id')
  find(@Param('id') id: string) {
    return requireJob(id, this.jobs.findById(id));
  }

  @Post(':id/cancel')
  cancel(@Param('id') id: string) {
    return requireJob(id, this.jobs.cancel(id));
  }

  @Post(':id/retry')
  retry(@Param('id') id: string) {
    return requireJob(id, this.jobs.retry(id));
  }
}

/** Errors that are not the filter's to answer. */
@Controller('other')
class OtherController {
  @Get('crash')
  crash(): never {
    throw new Error('database password is hunter2');
  }

  @Get('forbidden')
  forbidden(): never {
    throw new ForbiddenException('not yours');
  }

  @Get('timeout')
  timeout(): never {
    // A library error about a handler, not about the request: the table passes it on.
    throw new JobTimeoutError('0123456789abcdef01234567', 5);
  }
}

/**
 * A test-support route of the kind docs/testing.md suggests: enqueue, drain, answer; a drain that gives up is a 504.
 */
@Controller('drain')
class DrainController {
  constructor(private readonly jobs: JobsService) {}

  @Post()
  async drain() {
    // A name computed at run time, as tenants' are: which tenants and jobs exist is the app's business.
    const job = await this.jobs.enqueue('tenant.acme-corp.sync', { tenant: 'acme-corp' }, { strict: false });
    await this.jobs.drain({ names: ['tenant.acme-corp.sync'], timeoutMs: 1_000 });
    return job;
  }
}

describe('JobsExceptionFilter over HTTP (app.useGlobalFilters)', () => {
  let app: INestApplication;
  let request: Awaited<ReturnType<typeof listen>>;

  beforeAll(async () => {
    @Module({
      imports: [
        MongooseModule.forRoot(testMongoUri(), { dbName: uniqueDatabaseName('exception-filter') }),
        JobsModule.forRoot({ worker: false }),
      ],
      controllers: [JobsApiController, OtherController, DrainController],
      providers: [Handlers],
    })
    class AppModule {}

    app = await NestFactory.create(AppModule, { logger: false });
    app.useGlobalFilters(new JobsExceptionFilter(app.getHttpAdapter()));
    request = await listen(app);
  });
  afterAll(() => app?.close());

  it('answers 404 for a malformed id and for an id no job has', async () => {
    expect(await request('GET', '/jobs/%7B%24ne%3Anull%7D')).toEqual({
      status: 404,
      body: {
        statusCode: 404,
        error: 'InvalidJobIdError',
        message: 'Invalid job id "{$ne:null}": expected a 24-character hex string',
      },
    });
    expect(await request('POST', '/jobs/0123456789abcdef01234567/cancel')).toEqual({
      status: 404,
      body: { statusCode: 404, error: 'JobNotFoundError', message: 'No job 0123456789abcdef01234567' },
    });
    expect(await request('POST', '/jobs/0123456789abcdef01234567/retry')).toMatchObject({ status: 404 });
    expect(await request('GET', '/jobs/0123456789abcdef01234567')).toMatchObject({ status: 404 });
  });

  it('answers 400 for an unknown job name, a payload MongoDB cannot store and an invalid option', async () => {
    expect(await request('POST', '/jobs/nope', {})).toMatchObject({
      status: 400,
      body: { statusCode: 400, error: 'UnknownJobError', message: expect.stringContaining('"nope"') },
    });
    expect(await request('POST', '/jobs/report', { payload: { $where: 'sleep(1000)' } })).toMatchObject({
      status: 400,
      body: { statusCode: 400, error: 'InvalidPayloadError', message: expect.stringContaining('payload.$where') },
    });
    expect(await request('POST', '/jobs/report', { options: { delayMs: -1 } })).toMatchObject({
      status: 400,
      body: { statusCode: 400, error: 'InvalidOptionError', message: expect.stringContaining('delayMs') },
    });
  });

  it('answers 400 for a payload that passes on an upstream answer tagged like a BSON value (`_bsontype`)', async () => {
    const payload = { upstream: { items: [{ owner: { _bsontype: 'ObjectId', id: '5f1d7a0e2c3b4a5d6e7f8091' } }] } };
    expect(await request('POST', '/jobs/report', { payload })).toEqual({
      status: 400,
      body: {
        statusCode: 400,
        error: 'InvalidPayloadError',
        message: expect.stringContaining('payload.upstream.items.0.owner has a "_bsontype" key'),
      },
    });
  });

  it('answers 409 when retry meets another job holding the dedupe key, and the job is unchanged', async () => {
    const first = await request('POST', '/jobs/report', { options: { dedupeKey: 'monthly' } });
    expect(first.status).toBe(201);
    expect(await request('POST', `/jobs/${first.body.id}/cancel`)).toMatchObject({
      status: 201,
      body: { status: 'cancelled' },
    });
    const second = await request('POST', '/jobs/report', { options: { dedupeKey: 'monthly' } });
    expect(second.body.id).not.toBe(first.body.id);

    expect(await request('POST', `/jobs/${first.body.id}/retry`)).toEqual({
      status: 409,
      body: {
        statusCode: 409,
        error: 'DedupeConflictError',
        message: expect.stringContaining(`job ${second.body.id} holds its dedupeKey "monthly"`),
      },
    });
    expect(await request('GET', `/jobs/${first.body.id}`)).toMatchObject({
      status: 200,
      body: { status: 'cancelled' },
    });
  });

  it('keeps internal details out of 4xx bodies: no index or collection names, no list of handler names', async () => {
    const jobs = app.get<Connection>(getConnectionToken()).collection('jobs');
    await createIndexReady(
      jobs,
      { 'payload.invoice': 1 },
      { name: 'invoice_once_secret_ix', unique: true, sparse: true },
    );
    try {
      expect((await request('POST', '/jobs/report', { payload: { invoice: 7 } })).status).toBe(201);
      const clash = await request('POST', '/jobs/report', { payload: { invoice: 7 } });
      expect(clash).toMatchObject({ status: 409, body: { error: 'UniqueIndexRejectedJobError' } });
      expect(clash.body.message).toEqual(expect.stringContaining('"report"'));
      expect(Object.keys(clash.body).sort()).toEqual(['error', 'message', 'statusCode']);
      expect(clash.body.message).not.toMatch(/invoice_once_secret_ix|collection|jobs|index/);
    } finally {
      await jobs.dropIndex('invoice_once_secret_ix');
    }
    // The caller learns its name is unknown, not which jobs the application runs.
    const unknown = await request('POST', '/jobs/nope', {});
    expect(unknown).toMatchObject({ status: 400, body: { error: 'UnknownJobError' } });
    expect(unknown.body.message).toEqual(expect.stringContaining('"nope"'));
    expect(unknown.body.message).not.toContain('report');
  });

  it('answers a drain that gave up with 504 and no job names or ids in the body', async () => {
    const answer = await request('POST', '/drain');
    expect(answer).toEqual({
      status: 504,
      body: {
        statusCode: 504,
        error: 'DrainTimeoutError',
        message: 'Jobs were still left after 1000 ms (drain); they may still finish later.',
      },
    });
    const [left] = await app
      .get(JobsService)
      .list({ name: 'tenant.acme-corp.sync' })
      .then((page) => page.jobs);
    expect(JSON.stringify(answer.body)).not.toMatch(new RegExp(`acme|tenant|${left.id}`));
  });

  it('leaves other errors to Nest: 500 without details, HttpExceptions and undecided library errors as they are', async () => {
    expect(await request('GET', '/other/crash')).toEqual({
      status: 500,
      body: { statusCode: 500, message: 'Internal server error' },
    });
    expect(await request('GET', '/other/forbidden')).toEqual({
      status: 403,
      body: { statusCode: 403, error: 'Forbidden', message: 'not yours' },
    });
    expect(await request('GET', '/other/timeout')).toEqual({
      status: 500,
      body: { statusCode: 500, message: 'Internal server error' },
    });
  });
});

/** Nest builds the filter itself here (no adapter passed in): it must still find the HTTP adapter. */
describe('JobsExceptionFilter instantiated by Nest', () => {
  @Controller('filtered')
  @UseFilters(JobsExceptionFilter)
  class FilteredController {
    @Get('bad-id')
    badId(): never {
      throw new InvalidJobIdError('nope');
    }

    @Get('crash')
    crash(): never {
      throw new Error('boom');
    }
  }

  @Controller('unfiltered')
  class UnfilteredController {
    @Get('bad-id')
    badId(): never {
      throw new InvalidJobIdError('nope');
    }
  }

  it.each<[string, Provider[]]>([
    ['@UseFilters(JobsExceptionFilter)', []],
    ['an APP_FILTER provider', [{ provide: APP_FILTER, useClass: JobsExceptionFilter }]],
  ])('through %s', async (how, providers) => {
    @Module({ controllers: [FilteredController, UnfilteredController], providers })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false });
    try {
      const request = await listen(app);
      expect(await request('GET', '/filtered/bad-id')).toEqual({
        status: 404,
        body: { statusCode: 404, error: 'InvalidJobIdError', message: expect.stringContaining('"nope"') },
      });
      expect(await request('GET', '/filtered/crash')).toMatchObject({ status: 500 });
      // Only the global registration reaches a controller without @UseFilters.
      expect((await request('GET', '/unfiltered/bad-id')).status).toBe(how === 'an APP_FILTER provider' ? 404 : 500);
    } finally {
      await app.close();
    }
  });
});

/**
 * An APP_FILTER is global to every context Nest builds, not only HTTP routes: GraphQL resolvers, WebSocket gateways
 * and microservice handlers go through `ExternalContextCreator` (or its RPC/WS siblings) with the same global filters.
 */
describe('JobsExceptionFilter outside HTTP', () => {
  @Injectable()
  class JobsResolver {
    find(): never {
      throw new InvalidJobIdError('nope');
    }
  }

  it('leaves a library error of a non-HTTP handler as it is, instead of answering on an HTTP response', async () => {
    @Module({ providers: [JobsResolver, { provide: APP_FILTER, useClass: JobsExceptionFilter }] })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false });
    try {
      await app.init();
      const resolver = app.get(JobsResolver);
      const options = { guards: true, interceptors: true, filters: true };
      const find = app
        .get(ExternalContextCreator)
        .create(resolver, resolver.find, 'find', undefined, undefined, undefined, undefined, options, 'graphql');
      await expect(find()).rejects.toBeInstanceOf(InvalidJobIdError);
    } finally {
      await app.close();
    }
  });
});
