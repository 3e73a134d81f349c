import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { type INestApplication, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { getConnectionToken, MongooseModule } from '@nestjs/mongoose';
import type { Connection } from 'mongoose';
import { JobsModule } from '../../lib';
import { JobsDashboardModule } from '../../lib/dashboard';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** What the dashboard page sends with every mutation. */
const MUTATION = { 'content-type': 'application/json', 'x-jobs-dashboard': '1' };

/** `POST <path>/api/purge` honours the body's `limit` (an integer 1–1,000) and never deletes more than asked. */
describe('Dashboard purge: limit', () => {
  let app: INestApplication;
  let purge: (body: unknown) => Promise<{ status: number; body: Record<string, unknown> }>;
  const rows = () => app.get<Connection>(getConnectionToken()).collection('jobs');
  const completedRows = () => rows().countDocuments({ name: 'purge-limit', status: 'completed' });

  beforeAll(async () => {
    @Module({
      imports: [
        MongooseModule.forRoot(testMongoUri(), { dbName: uniqueDatabaseName('dashboard-purge-limit') }),
        JobsModule.forRoot({ worker: false }),
        JobsDashboardModule.forRoot({ allowAnonymous: true }),
      ],
    })
    class AppModule {}
    app = await NestFactory.create(AppModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as { port: number };
    purge = async (body) => {
      const response = await fetch(`http://127.0.0.1:${port}/jobs/api/purge`, {
        method: 'POST',
        headers: MUTATION,
        body: JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
  });
  afterAll(() => app?.close());

  /** Seven completed rows, as in the review's report. */
  beforeEach(async () => {
    await rows().deleteMany({});
    const at = new Date();
    await rows().insertMany(
      Array.from({ length: 7 }, () => ({ name: 'purge-limit', status: 'completed', runAt: at, finishedAt: at })),
    );
  });

  it('deletes at most `limit` rows and says whether more are left', async () => {
    expect(await purge({ status: 'completed', limit: 1 })).toEqual({ status: 200, body: { deleted: 1, more: true } });
    expect(await completedRows()).toBe(6);
    expect(await purge({ status: 'completed', limit: 4 })).toEqual({ status: 200, body: { deleted: 4, more: true } });
    expect(await completedRows()).toBe(2);
    // Fewer left than asked: all of them, and nothing more to come.
    expect(await purge({ status: 'completed', limit: 1_000 })).toEqual({
      status: 200,
      body: { deleted: 2, more: false },
    });
    expect(await completedRows()).toBe(0);
  });

  it.each<[string, unknown]>([
    ['0', 0],
    ['-1', -1],
    ['1.5', 1.5],
    ['1,001', 1_001],
    ['1e9', 1e9],
    ['a string "x"', 'x'],
    ['a numeric string "1"', '1'],
    ['an operator object {"$gt":0}', { $gt: 0 }],
    ['null', null],
    ['true', true],
    ['an array [1]', [1]],
  ])('refuses limit %s with 400 naming limit, deleting nothing', async (_label, limit) => {
    const answer = await purge({ status: 'completed', limit });
    expect(answer).toMatchObject({ status: 400, body: { statusCode: 400, error: 'InvalidOptionError' } });
    expect(answer.body.message).toMatch(/\blimit\b.*integer from 1 to 1000/);
    expect(await completedRows()).toBe(7);
  });
});
