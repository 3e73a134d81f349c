import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from '../../sample/app.module';
import { waitFor } from '../support/jobs-app';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** Boots the sample app on the test server and drives it over HTTP, as its README tells a user to. */
describe('sample app over HTTP', () => {
  let app: INestApplication;
  let base: string;

  beforeAll(async () => {
    app = await NestFactory.create(AppModule.forUri(testMongoUri(), uniqueDatabaseName('sample')), { logger: false });
    await app.listen(0, '127.0.0.1');
    const address = app.getHttpServer().address() as { port: number };
    base = `http://127.0.0.1:${address.port}`;
  });
  afterAll(() => app.close());

  /** The fields these tests read from the sample's JSON answers. */
  interface Body {
    id: string;
    status: string;
    attempts: { error: string }[];
    [key: string]: unknown;
  }
  const json = async (response: Response) => ({ status: response.status, body: (await response.json()) as Body });
  const post = (path: string, body: unknown) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then(json);
  const get = (path: string) => fetch(`${base}${path}`).then(json);

  it('enqueues a job with POST /jobs/:name and shows it completed at GET /jobs/:id', async () => {
    const created = await post('/jobs/hello', { name: 'Ada' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'hello', status: 'pending', payload: { name: 'Ada' } });
    await waitFor(
      async () => (await get(`/jobs/${created.body.id}`)).body.status === 'completed',
      'completed over HTTP',
    );
  });

  it('retries the flaky job until it succeeds on the third attempt', async () => {
    const created = await post('/jobs/flaky', {});
    await waitFor(
      async () => (await get(`/jobs/${created.body.id}`)).body.status === 'completed',
      'flaky completed',
      15_000,
    );
    const { body } = await get(`/jobs/${created.body.id}`);
    expect(body.attempts.map((a) => a.error)).toEqual(['flaky failure 1', 'flaky failure 2']);
  });

  it('answers through JobsExceptionFilter: 400 for an unknown job, 404 for a malformed id or a missing job', async () => {
    expect(await post('/jobs/nope', {})).toMatchObject({
      status: 400,
      body: { statusCode: 400, error: 'UnknownJobError' },
    });
    expect(await get('/jobs/%7B%24ne%3Anull%7D')).toMatchObject({
      status: 404,
      body: { statusCode: 404, error: 'InvalidJobIdError' },
    });
    expect(await get('/jobs/0123456789abcdef01234567')).toMatchObject({
      status: 404,
      body: { statusCode: 404, error: 'JobNotFoundError', message: 'No job 0123456789abcdef01234567' },
    });
  });

  it('reports GET /health up', async () => {
    expect(await get('/health')).toMatchObject({
      status: 200,
      body: { status: 'ok', info: { jobs: { status: 'up' } } },
    });
  });

  it('mounts the dashboard anonymously at /dashboard: the page and its API answer', async () => {
    const page = await fetch(`${base}/dashboard`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    const job = (await post('/jobs/hello', { name: 'Ada' })).body;
    await waitFor(async () => (await get(`/jobs/${job.id}`)).body.status === 'completed', 'the job to complete');
    const listed = await get('/dashboard/api/jobs?name=hello');
    expect(listed.status).toBe(200);
    expect(JSON.stringify(listed.body)).toContain(job.id);
  });
});
