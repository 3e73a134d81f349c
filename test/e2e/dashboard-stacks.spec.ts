import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MongooseModule } from '@nestjs/mongoose';
import { InvalidOptionError, JobHandler, JobsModule, JobsService } from '../../lib';
import { JobsDashboardModule } from '../../lib/dashboard';
import { waitFor } from '../support/jobs-app';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** What a driver's error chain can carry: a credential and an internal host, only in the cause. */
const SECRET_CAUSE = 'db password=hunter2 at 10.0.0.5';
const MUTATION = { 'content-type': 'application/json', 'x-jobs-dashboard': '1' };

/** `broken` always fails (dead after one attempt); `flaky` fails once, then completes with the attempt recorded. */
@Injectable()
class StackHandlers {
  static flakyRuns = 0;

  @JobHandler('stacks.broken', { maxAttempts: 1 })
  broken(): never {
    throw new Error('Sync failed', { cause: new Error(SECRET_CAUSE) });
  }

  @JobHandler('stacks.flaky', { maxAttempts: 2, backoff: { baseMs: 1, maxMs: 1 } })
  flaky(): void {
    StackHandlers.flakyRuns += 1;
    if (StackHandlers.flakyRuns === 1) throw new Error('First try failed', { cause: new Error(SECRET_CAUSE) });
  }
}

/** One app, the dashboard mounted twice: `jobs` with the defaults, `debug/jobs` with `showStacks: true`. */
describe('Dashboard API: stacks and causes', () => {
  let app: INestApplication;
  let base: string;
  let deadId: string;
  let completedId: string;

  const get = async (path: string) => {
    const response = await fetch(`${base}/${path}`);
    return { status: response.status, text: await response.text() };
  };
  const post = async (path: string) => {
    const response = await fetch(`${base}/${path}`, { method: 'POST', headers: MUTATION, body: '{}' });
    return { status: response.status, text: await response.text() };
  };

  beforeAll(async () => {
    @Module({
      imports: [
        MongooseModule.forRoot(testMongoUri(), { dbName: uniqueDatabaseName('dashboard-stacks') }),
        JobsModule.forRoot({ pollIntervalMs: 20 }),
        JobsDashboardModule.forRoot({ allowAnonymous: true }),
        JobsDashboardModule.forRoot({ path: 'debug/jobs', allowAnonymous: true, showStacks: true }),
      ],
      providers: [StackHandlers],
    })
    class AppModule {}
    app = await NestFactory.create(AppModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as { port: number };
    base = `http://127.0.0.1:${port}`;
    const jobs = app.get(JobsService);
    deadId = (await jobs.enqueue('stacks.broken')).id;
    completedId = (await jobs.enqueue('stacks.flaky')).id;
    await waitFor(async () => (await jobs.findById(deadId))?.status === 'dead', 'the broken job to go dead');
    await waitFor(async () => (await jobs.findById(completedId))?.status === 'completed', 'the flaky job to complete');
    // The stored attempts do carry the stack and its cause: what the dashboard must not pass on by default.
    expect((await jobs.findById(deadId))?.attempts[0]?.stack).toContain(`Caused by: Error: ${SECRET_CAUSE}`);
    expect((await jobs.findById(completedId))?.attempts[0]?.stack).toContain(SECRET_CAUSE);
  });
  afterAll(() => app?.close());

  it('serves no stack or cause text by default: list, job, and the 409 bodies of retry and cancel', async () => {
    const answers = {
      list: await get('jobs/api/jobs'),
      dead: await get(`jobs/api/jobs/${deadId}`),
      completed: await get(`jobs/api/jobs/${completedId}`),
      // A dead job cannot be cancelled, a completed one cannot be retried: 409 with the row as it is.
      cancelConflict: await post(`jobs/api/jobs/${deadId}/cancel`),
      retryConflict: await post(`jobs/api/jobs/${completedId}/retry`),
    };
    expect(Object.values(answers).map((answer) => answer.status)).toEqual([200, 200, 200, 409, 409]);
    for (const [what, { text }] of Object.entries(answers)) {
      expect([what, text]).toEqual([
        what,
        expect.not.stringMatching(/hunter2|10\.0\.0\.5|Caused by|"stack"|\\n\s+at /),
      ]);
    }
    // What an operator still sees: each attempt's message and class.
    expect(JSON.parse(answers.dead.text).attempts).toEqual([
      { at: expect.any(String), error: 'Sync failed', errorClass: 'Error' },
    ]);
    expect(JSON.parse(answers.retryConflict.text).job.attempts).toEqual([
      { at: expect.any(String), error: 'First try failed', errorClass: 'Error' },
    ]);
  });

  it('serves each attempt’s stack with its cause chain with showStacks, in the job, the list and 409 bodies', async () => {
    const dead = JSON.parse((await get(`debug/jobs/api/jobs/${deadId}`)).text);
    expect(dead.attempts[0].stack).toMatch(/^Error: Sync failed\n\s+at /);
    expect(dead.attempts[0].stack).toContain(`Caused by: Error: ${SECRET_CAUSE}`);
    expect(dead).not.toHaveProperty('payload');
    const list = JSON.parse((await get('debug/jobs/api/jobs?status=dead')).text);
    expect(list.jobs.map((job: { attempts: { stack?: string }[] }) => job.attempts[0].stack)).toEqual([
      expect.stringContaining(SECRET_CAUSE),
    ]);
    const conflict = await post(`debug/jobs/api/jobs/${completedId}/retry`);
    expect(conflict.status).toBe(409);
    expect(JSON.parse(conflict.text).job.attempts[0].stack).toContain(SECRET_CAUSE);
  });

  it('refuses a showStacks that is not a boolean', () => {
    expect(() => JobsDashboardModule.forRoot({ allowAnonymous: true, showStacks: 'yes' as never })).toThrow(
      InvalidOptionError,
    );
  });
});
