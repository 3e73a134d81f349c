import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  type CanActivate,
  type ExecutionContext,
  type INestApplication,
  Injectable,
  Module,
  UnauthorizedException,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { getConnectionToken, MongooseModule } from '@nestjs/mongoose';
import type { Connection } from 'mongoose';
import { DashboardGuardRequiredError, InvalidOptionError, JobsModule, JobsService } from '../../lib';
import { JobsDashboardModule, type JobsDashboardOptions } from '../../lib/dashboard';
import { storedJobRow } from '../support/stored-job-row';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

interface Answer {
  status: number;
  body: Record<string, unknown>;
}
type Request = (
  method: 'GET' | 'POST',
  path: string,
  init?: { body?: unknown; raw?: string; headers?: Record<string, string> },
) => Promise<Answer>;

/** What the dashboard page sends on every call: the app's credentials, and for mutations the JSON body and header. */
const AUTH = { authorization: 'Bearer good' };
const MUTATION = { ...AUTH, 'content-type': 'application/json', 'x-jobs-dashboard': '1' };
const UNKNOWN_ID = '0123456789abcdef01234567';

/** The app's own auth: no token → false (403), a wrong token → 401. */
@Injectable()
class TokenGuard implements CanActivate {
  // Resolved through DI: it gets the app's providers (JobsService is global).
  constructor(readonly jobs: JobsService) {}

  canActivate(context: ExecutionContext): boolean {
    const header = context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers.authorization;
    if (header === undefined) return false;
    if (header !== 'Bearer good' || !(this.jobs instanceof JobsService)) throw new UnauthorizedException();
    return true;
  }
}

async function startApp(
  label: string,
  dashboard: JobsDashboardOptions,
): Promise<{ app: INestApplication; request: Request }> {
  @Module({
    imports: [
      MongooseModule.forRoot(testMongoUri(), { dbName: uniqueDatabaseName(label) }),
      JobsModule.forRoot({ worker: false }),
      JobsDashboardModule.forRoot(dashboard),
    ],
  })
  class AppModule {}
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  const request: Request = async (method, path, init = {}) => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      headers: init.headers ?? (method === 'POST' ? MUTATION : AUTH),
      body: init.raw ?? (init.body === undefined ? (method === 'POST' ? '{}' : undefined) : JSON.stringify(init.body)),
    });
    const text = await response.text();
    return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  };
  return { app, request };
}

const rows = (app: INestApplication) => app.get<Connection>(getConnectionToken()).collection('jobs');

/** Sets a job to a final status as a worker would have left it. */
async function finish(app: INestApplication, id: string, status: 'dead' | 'failed' | 'completed'): Promise<void> {
  const { Types } = await import('mongoose');
  const at = new Date();
  await rows(app).updateOne(
    { _id: new Types.ObjectId(id) },
    {
      $set: {
        status,
        finishedAt: at,
        attemptCount: status === 'completed' ? 0 : 3,
        lastError: status === 'completed' ? null : 'boom',
        attempts: status === 'completed' ? [] : [{ at, error: 'boom', errorClass: 'Error' }],
        result: status === 'completed' ? { sent: 1 } : null,
      },
    },
  );
}

describe('Dashboard JSON API (guarded, payloads hidden)', () => {
  let app: INestApplication;
  let request: Request;
  let jobs: JobsService;

  beforeAll(async () => {
    ({ app, request } = await startApp('dashboard-api', { guard: TokenGuard }));
    jobs = app.get(JobsService);
  });
  afterAll(() => app?.close());

  const enqueue = async (name: string, payload: unknown = { secret: 's3' }) =>
    (await jobs.enqueue(name, payload, { strict: false })).id;

  it('puts every route behind the guard: 403 when it refuses, 401 when it throws, GET and POST alike', async () => {
    const id = await enqueue('guarded');
    for (const [method, path] of [
      ['GET', '/jobs/api/jobs'],
      ['GET', `/jobs/api/jobs/${id}`],
      ['GET', '/jobs/api/metrics'],
      ['GET', '/jobs/api/workers'],
      ['POST', `/jobs/api/jobs/${id}/cancel`],
      ['POST', '/jobs/api/purge'],
      ['POST', '/jobs/api/pause'],
      ['POST', '/jobs/api/resume'],
    ] as const) {
      const headers = method === 'POST' ? { ...MUTATION, authorization: undefined } : {};
      delete (headers as Record<string, unknown>).authorization;
      expect([
        method,
        path,
        (await request(method, path, { headers: headers as Record<string, string> })).status,
      ]).toEqual([method, path, 403]);
      const bad = { ...headers, authorization: 'Bearer bad' } as Record<string, string>;
      expect([method, path, (await request(method, path, { headers: bad })).status]).toEqual([method, path, 401]);
    }
    expect((await jobs.findById(id))?.status).toBe('pending');
  });

  it('refuses a mutation with 403 without the x-jobs-dashboard header or a JSON body, and changes nothing', async () => {
    const id = await enqueue('csrf');
    const noHeader = { ...AUTH, 'content-type': 'application/json' };
    const form = { ...AUTH, 'x-jobs-dashboard': '1', 'content-type': 'application/x-www-form-urlencoded' };
    expect(await request('POST', `/jobs/api/jobs/${id}/cancel`, { headers: noHeader })).toMatchObject({
      status: 403,
      body: { message: expect.stringContaining('x-jobs-dashboard: 1') },
    });
    expect((await request('POST', `/jobs/api/jobs/${id}/cancel`, { headers: form, raw: 'a=1' })).status).toBe(403);
    expect(
      (await request('POST', `/jobs/api/jobs/${id}/cancel`, { headers: { ...noHeader, 'x-jobs-dashboard': '0' } }))
        .status,
    ).toBe(403);
    expect((await jobs.findById(id))?.status).toBe('pending');
  });

  it('pauses and resumes a name (JSON body, header checked), and refuses a bad name with 400, writing nothing', async () => {
    const noHeader = { ...AUTH, 'content-type': 'application/json' };
    expect((await request('POST', '/jobs/api/pause', { headers: noHeader, body: { name: 'p.api' } })).status).toBe(403);
    expect(await jobs.pausedNames()).toEqual([]);
    expect(await request('POST', '/jobs/api/pause', { body: { name: 'p.api' } })).toMatchObject({
      status: 200,
      body: { name: 'p.api', paused: true },
    });
    expect((await jobs.pausedNames()).map((p) => p.name)).toEqual(['p.api']);
    const metrics = await request('GET', '/jobs/api/metrics');
    expect(metrics.body.paused).toEqual(['p.api']);
    for (const body of [{}, { name: '' }, { name: 42 }, { name: 'x'.repeat(201) }, []]) {
      expect([body, (await request('POST', '/jobs/api/pause', { body })).status]).toEqual([body, 400]);
    }
    expect(await request('POST', '/jobs/api/resume', { body: { name: 'p.api' } })).toMatchObject({
      status: 200,
      body: { name: 'p.api', paused: false, wasPaused: true },
    });
    expect(await request('POST', '/jobs/api/resume', { body: { name: 'p.api' } })).toMatchObject({
      body: { wasPaused: false },
    });
    expect(await jobs.pausedNames()).toEqual([]);
  });

  it('lists with filters from the query string and pages 500 jobs by cursor with no duplicate or missing row', async () => {
    const paged = (
      await jobs.enqueueMany(Array.from({ length: 500 }, (_, i) => ({ name: 'paged', payload: { i } })) as never)
    ).map((job) => job.id);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const answer = await request('GET', `/jobs/api/jobs?name=paged&limit=37${cursor ? `&cursor=${cursor}` : ''}`);
      expect(answer.status).toBe(200);
      seen.push(...(answer.body.jobs as { id: string }[]).map((job) => job.id));
      cursor = answer.body.nextCursor as string | null;
      pages += 1;
    } while (cursor !== null);
    expect(pages).toBe(Math.ceil(500 / 37));
    expect(new Set(seen).size).toBe(500);
    expect([...seen].sort()).toEqual([...paged].sort());

    const dead = await enqueue('filtered');
    const failed = await enqueue('filtered');
    await enqueue('filtered');
    await finish(app, dead, 'dead');
    await finish(app, failed, 'failed');
    const byStatus = await request('GET', '/jobs/api/jobs?name=filtered&status=dead,failed');
    expect((byStatus.body.jobs as { id: string }[]).map((job) => job.id)).toEqual([failed, dead]);
    const repeated = await request('GET', '/jobs/api/jobs?name=filtered&status=dead&status=failed&limit=1');
    expect((repeated.body.jobs as { id: string }[]).map((job) => job.id)).toEqual([failed]);
    expect(repeated.body.nextCursor).toEqual(expect.any(String));
    const bySearch = await request('GET', `/jobs/api/jobs?search=${dead}`);
    expect((bySearch.body.jobs as { id: string }[]).map((job) => job.id)).toEqual([dead]);
    const future = new Date(Date.now() + 60_000).toISOString();
    expect(await request('GET', `/jobs/api/jobs?name=filtered&from=${future}`)).toEqual({
      status: 200,
      body: { jobs: [], nextCursor: null },
    });
    const past = new Date(Date.now() - 60_000).toISOString();
    expect(
      ((await request('GET', `/jobs/api/jobs?name=filtered&from=${past}&to=${future}`)).body.jobs as []).length,
    ).toBe(3);
  });

  it('hides payloads and results without showPayloads, and always shows errors and attempts', async () => {
    const id = await enqueue('private', { card: '4111' });
    await finish(app, id, 'dead');
    const done = await enqueue('private', { card: '4242' });
    await finish(app, done, 'completed');
    const one = await request('GET', `/jobs/api/jobs/${id}`);
    expect(one).toMatchObject({ status: 200, body: { id, status: 'dead', lastError: 'boom', attemptCount: 3 } });
    expect(one.body.attempts).toEqual([{ at: expect.any(String), error: 'boom', errorClass: 'Error' }]);
    expect(one.body).not.toHaveProperty('payload');
    expect(one.body).not.toHaveProperty('result');
    const listed = await request('GET', '/jobs/api/jobs?name=private');
    expect(listed.body.jobs).toHaveLength(2);
    for (const job of listed.body.jobs as Record<string, unknown>[]) {
      expect(job).not.toHaveProperty('payload');
      expect(job).not.toHaveProperty('result');
    }
    expect(JSON.stringify(listed.body)).not.toMatch(/4111|4242|sent/);
  });

  it('retries and cancels one job, and answers 409 with the current row when its state does not allow it', async () => {
    const id = await enqueue('single');
    await finish(app, id, 'dead');
    expect(await request('POST', `/jobs/api/jobs/${id}/retry`)).toMatchObject({
      status: 200,
      body: { id, status: 'pending', attemptCount: 0, attempts: [expect.objectContaining({ error: 'boom' })] },
    });
    expect((await jobs.findById(id))?.status).toBe('pending');
    // Retrying a pending job is a no-op that already holds: 200.
    expect(await request('POST', `/jobs/api/jobs/${id}/retry`)).toMatchObject({
      status: 200,
      body: { status: 'pending' },
    });
    expect(await request('POST', `/jobs/api/jobs/${id}/cancel`)).toMatchObject({
      status: 200,
      body: { id, status: 'cancelled' },
    });
    expect((await jobs.findById(id))?.status).toBe('cancelled');
    expect(await request('POST', `/jobs/api/jobs/${id}/cancel`)).toMatchObject({
      status: 200,
      body: { status: 'cancelled' },
    });

    const done = await enqueue('single');
    await finish(app, done, 'completed');
    for (const action of ['retry', 'cancel']) {
      const conflict = await request('POST', `/jobs/api/jobs/${done}/${action}`);
      expect(conflict).toMatchObject({
        status: 409,
        body: {
          statusCode: 409,
          error: 'JobStateConflictError',
          message: expect.stringContaining('completed'),
          job: { id: done, status: 'completed' },
        },
      });
      expect(conflict.body.job).not.toHaveProperty('result');
    }
    expect((await jobs.findById(done))?.status).toBe('completed');
  });

  it('promotes a delayed pending job to due now, and answers 409 with the row for any other status', async () => {
    const id = (await jobs.enqueue('delayed', {}, { strict: false, delayMs: 3_600_000 })).id;
    const before = Date.now();
    const promoted = await request('POST', `/jobs/api/jobs/${id}/promote`);
    expect(promoted).toMatchObject({ status: 200, body: { id, status: 'pending' } });
    expect(Date.parse(String(promoted.body.runAt))).toBeLessThanOrEqual(Date.now());
    expect(Date.parse(String(promoted.body.runAt))).toBeGreaterThanOrEqual(before);
    const done = await enqueue('single');
    await finish(app, done, 'completed');
    expect(await request('POST', `/jobs/api/jobs/${done}/promote`)).toMatchObject({
      status: 409,
      body: {
        error: 'JobStateConflictError',
        message: expect.stringContaining('only pending jobs'),
        job: { id: done },
      },
    });
    expect(await request('POST', `/jobs/api/jobs/${UNKNOWN_ID}/promote`)).toMatchObject({ status: 404 });
  });

  it('answers 409 with the row when retry meets another job holding the dedupe key', async () => {
    const first = (await jobs.enqueue('keyed', {}, { strict: false, dedupeKey: 'k' })).id;
    await finish(app, first, 'failed');
    const holder = (await jobs.enqueue('keyed', {}, { strict: false, dedupeKey: 'k' })).id;
    const answer = await request('POST', `/jobs/api/jobs/${first}/retry`);
    expect(answer).toMatchObject({
      status: 409,
      body: {
        error: 'DedupeConflictError',
        message: expect.stringContaining(holder),
        job: { id: first, status: 'failed' },
      },
    });
  });

  it('retries every dead (or failed) job of a name in bulk and returns the count', async () => {
    const dead = [await enqueue('bulk'), await enqueue('bulk'), await enqueue('bulk')];
    const failed = await enqueue('bulk');
    const other = await enqueue('bulk-other');
    for (const id of dead) await finish(app, id, 'dead');
    await finish(app, failed, 'failed');
    await finish(app, other, 'dead');
    expect(await request('POST', '/jobs/api/jobs/retry', { body: { name: 'bulk', status: 'dead' } })).toEqual({
      status: 200,
      body: { retried: 3, skipped: 0, more: false, nextCursor: null },
    });
    for (const id of dead) expect((await jobs.findById(id))?.status).toBe('pending');
    expect((await jobs.findById(failed))?.status).toBe('failed');
    expect((await jobs.findById(other))?.status).toBe('dead');
    expect(await request('POST', '/jobs/api/jobs/retry', { body: { name: 'bulk', status: 'failed' } })).toMatchObject({
      status: 200,
      body: { retried: 1 },
    });
  });

  it('walks a bulk retry of more than 1,000 jobs by cursor: each job once, even when the revived ones die again', async () => {
    await rows(app).insertMany(
      Array.from({ length: 1_002 }, () =>
        storedJobRow({ name: 'bulk-walk', status: 'dead', maxAttempts: 1 }),
      ) as never[],
    );
    const first = await request('POST', '/jobs/api/jobs/retry', { body: { name: 'bulk-walk', status: 'dead' } });
    expect(first).toMatchObject({ status: 200, body: { retried: 1_000, skipped: 0, more: true } });
    // The revived jobs die again before the next call (a handler that always throws): a walk restarted from the
    // newest would find 1,000 dead jobs again, for ever.
    await rows(app).updateMany({ name: 'bulk-walk', status: 'pending' }, { $set: { status: 'dead' } });
    const cursor = first.body.nextCursor;
    expect(typeof cursor).toBe('string');
    expect(
      await request('POST', '/jobs/api/jobs/retry', { body: { name: 'bulk-walk', status: 'dead', cursor } }),
    ).toEqual({ status: 200, body: { retried: 2, skipped: 0, more: false, nextCursor: null } });
  });

  it('purges at most 1,000 jobs per call and says when more are left, so one request cannot run for minutes', async () => {
    const at = new Date();
    await rows(app).insertMany(
      Array.from({ length: 1_001 }, () => ({
        name: 'mass-purged',
        payload: null,
        status: 'dead',
        runAt: at,
        priority: 0,
        attemptCount: 1,
        maxAttempts: 1,
        attempts: [],
        fencingToken: 1,
        createdAt: at,
        updatedAt: at,
        finishedAt: at,
      })),
    );
    const body = { status: 'dead', name: 'mass-purged' };
    expect(await request('POST', '/jobs/api/purge', { body })).toEqual({
      status: 200,
      body: { deleted: 1_000, more: true },
    });
    expect(await rows(app).countDocuments({ name: 'mass-purged' })).toBe(1);
    expect(await request('POST', '/jobs/api/purge', { body })).toEqual({
      status: 200,
      body: { deleted: 1, more: false },
    });
  });

  it('purges finished jobs and serves metrics and workers', async () => {
    const id = await enqueue('purged');
    await finish(app, id, 'dead');
    const kept = await enqueue('purged');
    expect(await request('POST', '/jobs/api/purge', { body: { status: 'dead', name: 'purged' } })).toEqual({
      status: 200,
      body: { deleted: 1, more: false },
    });
    expect(await jobs.findById(id)).toBeNull();
    expect((await jobs.findById(kept))?.status).toBe('pending');

    const metrics = await request('GET', '/jobs/api/metrics?windowMs=600000&bucketMs=60000');
    expect(metrics.status).toBe(200);
    expect(JSON.stringify(metrics.body)).toContain('"purged"');
    expect((await request('GET', '/jobs/api/metrics')).status).toBe(200);
    // worker: false, so this app has no presence document.
    expect(await request('GET', '/jobs/api/workers')).toEqual({ status: 200, body: { workers: [] } });
  });

  it('serves metrics with buckets for the names asked for (repeated `names`), or 20 by default, and a total', async () => {
    const docs = Array.from({ length: 30 }, (_, i) => ({
      name: `http.tenant.${i}`,
      payload: null,
      status: 'dead',
      runAt: new Date(),
      attemptCount: 3,
      maxAttempts: 3,
      attempts: [],
      fencingToken: 0,
      finishedAt: new Date(),
      createdAt: new Date(),
      updatedAt: new Date(),
    }));
    await rows(app).insertMany(docs);
    type Entry = { name: string; buckets: unknown[] | null; counts: Record<string, number> };
    const charted = (body: Record<string, unknown>) =>
      (body.names as Entry[]).filter((entry) => entry.buckets !== null).map((entry) => entry.name);
    const byDefault = await request('GET', '/jobs/api/metrics?windowMs=600000&bucketMs=60000');
    expect(byDefault.status).toBe(200);
    expect(charted(byDefault.body)).toHaveLength(20);
    const tenants = (byDefault.body.names as Entry[]).filter((entry) => entry.name.startsWith('http.tenant.'));
    expect(tenants.map((entry) => entry.counts.dead)).toEqual(Array(30).fill(1));
    expect(
      (byDefault.body.total as { dead: number }[]).reduce((sum, bucket) => sum + bucket.dead, 0),
    ).toBeGreaterThanOrEqual(30);

    const asked = await request('GET', '/jobs/api/metrics?names=http.tenant.7&names=http.tenant.12');
    expect(asked.status).toBe(200);
    expect(charted(asked.body)).toEqual(['http.tenant.12', 'http.tenant.7']);
    const one = await request('GET', '/jobs/api/metrics?names=http.tenant.3');
    expect(charted(one.body)).toEqual(['http.tenant.3']);
  });

  it('refuses metrics over the bucket budget, and bad names, with 400', async () => {
    const many = Array.from({ length: 12 }, (_, i) => `names=n${i}`).join('&');
    const over = await request('GET', `/jobs/api/metrics?windowMs=1000000&bucketMs=1000&${many}`);
    expect(over.status).toBe(400);
    expect(String(over.body.message)).toMatch(/names.*budget/);
    const fiftyOne = Array.from({ length: 51 }, (_, i) => `names=n${i}`).join('&');
    for (const query of ['names=', `names=${'x'.repeat(201)}`, fiftyOne, 'names[a]=b']) {
      const answer = await request('GET', `/jobs/api/metrics?${query}`);
      expect([query.slice(0, 20), answer.status, String(answer.body.message).includes('names')]).toEqual([
        query.slice(0, 20),
        400,
        true,
      ]);
    }
  });

  it('lists and shows a row whose _id is not an ObjectId (set aside as failed by a worker)', async () => {
    const at = new Date();
    await rows(app).insertOne({
      _id: 'foreign-1' as never,
      name: 'foreign',
      payload: null,
      status: 'failed',
      runAt: at,
      attemptCount: 0,
      maxAttempts: 1,
      attempts: [],
      fencingToken: 0,
      lastError: 'its _id is not an ObjectId',
      createdAt: at,
      updatedAt: at,
    });
    const listed = await request('GET', '/jobs/api/jobs?name=foreign');
    expect(listed.body.jobs).toEqual([expect.objectContaining({ id: 'foreign-1', status: 'failed' })]);
    expect(await request('GET', '/jobs/api/jobs/foreign-1')).toMatchObject({
      status: 200,
      body: { id: 'foreign-1', status: 'failed', lastError: 'its _id is not an ObjectId' },
    });
    // An id no row has, in the same shape, is still a 404; so is one longer than any search.
    expect((await request('GET', '/jobs/api/jobs/foreign-2')).status).toBe(404);
    expect((await request('GET', `/jobs/api/jobs/${'x'.repeat(1_001)}`)).status).toBe(404);
  });

  it('answers bad input with 404 (ids) or 400 with the reason, never 500', async () => {
    const cases: [method: 'GET' | 'POST', path: string, body: unknown, status: number, reason?: string][] = [
      ['GET', '/jobs/api/jobs?limit=0', undefined, 400, 'limit'],
      ['GET', '/jobs/api/jobs?limit=abc', undefined, 400, 'limit'],
      ['GET', '/jobs/api/jobs?limit=201', undefined, 400, 'limit'],
      ['GET', '/jobs/api/jobs?limit=1.5', undefined, 400, 'limit'],
      ['GET', '/jobs/api/jobs?status=nope', undefined, 400, 'status'],
      ['GET', '/jobs/api/jobs?status=dead,', undefined, 400, 'status'],
      ['GET', '/jobs/api/jobs?from=yesterday', undefined, 400, 'from'],
      ['GET', '/jobs/api/jobs?to=2026-13-45T00:00:00Z', undefined, 400, 'to'],
      ['GET', '/jobs/api/jobs?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z', undefined, 400, 'from'],
      ['GET', '/jobs/api/jobs?cursor=not-a-cursor', undefined, 400, 'cursor'],
      ['GET', '/jobs/api/jobs?sort=name', undefined, 400, 'sort'],
      ['GET', '/jobs/api/jobs?name=', undefined, 400, 'name'],
      ['GET', '/jobs/api/jobs?name=a&name=b', undefined, 400, 'name'],
      ['GET', '/jobs/api/jobs/not-an-id', undefined, 404],
      ['GET', `/jobs/api/jobs/${UNKNOWN_ID}`, undefined, 404],
      ['POST', '/jobs/api/jobs/%7B%24ne%3Anull%7D/retry', {}, 404],
      ['POST', `/jobs/api/jobs/${UNKNOWN_ID}/cancel`, {}, 404],
      ['POST', `/jobs/api/jobs/${UNKNOWN_ID}/retry`, {}, 404],
      ['POST', '/jobs/api/jobs/retry', { name: 'bulk', status: 'completed' }, 400, 'status'],
      ['POST', '/jobs/api/jobs/retry', { status: 'dead' }, 400, 'name'],
      ['POST', '/jobs/api/jobs/retry', { name: 'bulk', status: 'dead', limit: 5 }, 400, 'limit'],
      ['POST', '/jobs/api/jobs/retry', [], 400, 'body'],
      ['POST', '/jobs/api/jobs/retry', { name: 'bulk', status: 'dead', cursor: 'not-a-cursor' }, 400, 'cursor'],
      ['POST', '/jobs/api/jobs/retry', { name: 'bulk', status: 'dead', cursor: 7 }, 400, 'cursor'],
      ['POST', '/jobs/api/purge', { status: 'pending' }, 400, 'status'],
      ['POST', '/jobs/api/purge', { status: 'dead', finishedBefore: 'soon' }, 400, 'finishedBefore'],
      ['POST', '/jobs/api/purge', { status: 'dead', before: '2026-01-01T00:00:00Z' }, 400, 'before'],
      ['GET', '/jobs/api/metrics?windowMs=-5', undefined, 400, 'windowMs'],
      ['GET', '/jobs/api/metrics?windowMs=1000&bucketMs=5000', undefined, 400, 'bucketMs'],
      ['GET', '/jobs/api/metrics?bucketMs=abc', undefined, 400, 'bucketMs'],
      ['GET', '/jobs/api/nothing', undefined, 404],
      // An impossible calendar day is refused, not rolled over into the next month (a purge would delete more).
      ['GET', '/jobs/api/jobs?from=2026-02-30', undefined, 400, 'from'],
      ['GET', '/jobs/api/jobs?to=2026-04-31T00:00:00Z', undefined, 400, 'to'],
      ['POST', '/jobs/api/purge', { status: 'dead', finishedBefore: '2026-02-31T00:00:00Z' }, 400, 'finishedBefore'],
      // A key the query parser would otherwise drop silently is refused like any unknown key.
      ['GET', '/jobs/api/jobs?__proto__=x', undefined, 400, '__proto__'],
      ['GET', '/jobs/api/metrics?__proto__=x', undefined, 400, '__proto__'],
    ];
    expect(cases.length).toBeGreaterThanOrEqual(15);
    const answers = [];
    for (const [method, path, body, status, reason] of cases) {
      const answer = await request(method, path, { body });
      answers.push([method, path, answer.status, reason && String(answer.body.message).includes(reason)]);
      expect(answers.at(-1)).toEqual([method, path, status, reason && true]);
    }
    const malformed = await request('POST', '/jobs/api/purge', { raw: '{"status":' });
    expect(malformed.status).toBe(400);
  });
});

describe('Dashboard JSON API (anonymous, read-only, payloads shown, custom path)', () => {
  let app: INestApplication;
  let request: Request;

  beforeAll(async () => {
    ({ app, request } = await startApp('dashboard-ro', {
      path: '/admin/queue/',
      allowAnonymous: true,
      readOnly: true,
      showPayloads: true,
    }));
  });
  afterAll(() => app?.close());

  it('serves reads without a guard, under the given path, with payloads and results', async () => {
    const jobs = app.get(JobsService);
    const id = (await jobs.enqueue('shown', { to: 'a@b.c' }, { strict: false })).id;
    await finish(app, id, 'completed');
    expect(await request('GET', `/admin/queue/api/jobs/${id}`, { headers: {} })).toMatchObject({
      status: 200,
      body: { id, payload: { to: 'a@b.c' }, result: { sent: 1 } },
    });
    expect((await request('GET', '/jobs/api/jobs', { headers: {} })).status).toBe(404);
  });

  it('does not mount mutations: 404, and the job is unchanged', async () => {
    const jobs = app.get(JobsService);
    const id = (await jobs.enqueue('ro', {}, { strict: false })).id;
    const paths = [
      `jobs/${id}/cancel`,
      `jobs/${id}/retry`,
      `jobs/${id}/promote`,
      'jobs/retry',
      'purge',
      'pause',
      'resume',
    ];
    for (const path of paths) {
      expect([
        path,
        (await request('POST', `/admin/queue/api/${path}`, { body: { name: 'ro', status: 'dead' } })).status,
      ]).toEqual([path, 404]);
    }
    expect((await jobs.findById(id))?.status).toBe('pending');
  });
});

describe('JobsDashboardModule.forRoot options', () => {
  it('refuses to build without a guard unless allowAnonymous is set, saying how to add one', () => {
    expect(() => JobsDashboardModule.forRoot()).toThrow(DashboardGuardRequiredError);
    expect(() => JobsDashboardModule.forRoot({ allowAnonymous: false })).toThrow(/guard: YourAuthGuard/);
    expect(() => JobsDashboardModule.forRoot({ allowAnonymous: true })).not.toThrow();
  });

  it('refuses bad options with InvalidOptionError', () => {
    expect(() => JobsDashboardModule.forRoot({ guard: 'auth' as never })).toThrow(InvalidOptionError);
    expect(() => JobsDashboardModule.forRoot({ guard: TokenGuard, path: '' })).toThrow(InvalidOptionError);
    expect(() => JobsDashboardModule.forRoot({ guard: TokenGuard, path: '../x?y' })).toThrow(InvalidOptionError);
    expect(() => JobsDashboardModule.forRoot({ guard: TokenGuard, readonly: true } as never)).toThrow(
      /not a dashboard option/,
    );
  });

  it('fails the bootstrap of an app that mounts it without a guard', async () => {
    const boot = async () => {
      @Module({ imports: [JobsModule.forRoot({ worker: false }), JobsDashboardModule.forRoot({})] })
      class AppModule {}
      return NestFactory.create(AppModule, { logger: false });
    };
    await expect(boot()).rejects.toThrow(DashboardGuardRequiredError);
  });
});
