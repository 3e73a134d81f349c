import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable, type Type } from '@nestjs/common';
import { Cron, ScheduleModule } from '@nestjs/schedule';
import { InvalidOptionError, type JobExecutionContext, JobHandler } from '../../lib';
import { JobHandlerRegistry } from '../../lib/discovery/job-handler.registry';
import { JobsCronScheduler } from '../../lib/schedule/jobs-cron.scheduler';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

const runs: { jobId: string; scheduledFor: string; worker: string }[] = [];
let appCronTicks = 0;

@Injectable()
class CronHandlers {
  @JobHandler('every-second', { cron: '* * * * * *', timeZone: 'Europe/Berlin' })
  tick(payload: { scheduledFor: string }, ctx: JobExecutionContext) {
    runs.push({ jobId: ctx.jobId, scheduledFor: payload.scheduledFor, worker: ctx.lockId.split('#')[0] });
  }
}

/** The app's own @nestjs/schedule usage next to ours: it must not run twice. */
@Injectable()
class AppCron {
  @Cron('* * * * * *')
  count() {
    appCronTicks += 1;
  }
}

describe('cron handlers', () => {
  const apps: JobsTestApp[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
    runs.length = 0;
  });

  const start = async (dbName: string, workerId: string, providers: Type<unknown>[] = [CronHandlers]) => {
    const app = await createJobsTestApp({
      dbName,
      options: { workerId, pollIntervalMs: 50 },
      providers,
      imports: [ScheduleModule.forRoot()],
    });
    apps.push(app);
    return app;
  };

  it('enqueues exactly one job per tick across two instances, each run once', async () => {
    const dbName = uniqueDatabaseName('cron');
    const [a, b] = [await start(dbName, 'a', [CronHandlers, AppCron]), await start(dbName, 'b')];
    // Count every instance's insert attempts: both try each tick, the unique key lets one win.
    const attempts = { won: 0, lost: 0 };
    for (const app of [a, b]) {
      const insert = app.repository.insertScheduled.bind(app.repository);
      app.repository.insertScheduled = async (doc) => {
        const stored = await insert(doc);
        attempts[stored ? 'won' : 'lost'] += 1;
        return stored;
      };
    }
    const ticksBefore = appCronTicks;
    const startedAt = Date.now();
    await waitFor(() => new Set(runs.map((r) => r.scheduledFor)).size >= 3, 'three ticks', 6_000);
    const elapsedTicks = Math.round((Date.now() - startedAt) / 1000);
    await a.close();
    apps.splice(0, 1);

    const rows = await apps[0].connection.collection('jobs').find({ name: 'every-second' }).toArray();
    const keys = rows.map((row) => row.scheduleKey as string);
    expect(new Set(keys).size).toBe(rows.length);
    expect(attempts.won).toBeLessThanOrEqual(rows.length);
    expect(attempts.lost).toBeGreaterThanOrEqual(2);
    for (const row of rows)
      expect(row.scheduleKey).toBe(`cron:every-second:${(row.payload as { scheduledFor: string }).scheduledFor}`);
    // Ticks are whole seconds in UTC, and each completed job ran exactly once.
    for (const run of runs) expect(run.scheduledFor).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/);
    expect(new Set(runs.map((r) => r.jobId)).size).toBe(runs.length);
    // The app's own @Cron ticked about once per second, not twice (ScheduleModule is not duplicated).
    expect(appCronTicks - ticksBefore).toBeLessThanOrEqual(elapsedTicks + 1);
    expect(appCronTicks - ticksBefore).toBeGreaterThanOrEqual(elapsedTicks - 1);
  });

  it('adds nothing when an instance fires late for a tick whose job already completed', async () => {
    const dbName = uniqueDatabaseName('cron_late');
    const app = await start(dbName, 'a');
    await waitFor(() => runs.length >= 1, 'a first tick to run', 4_000);
    const done = runs[0];
    await waitFor(async () => (await app.jobs.findById(done.jobId))?.status === 'completed', 'completion');
    const handler = app.get(JobHandlerRegistry).get('every-second');
    if (!handler) throw new Error('handler not registered');
    // A second instance whose timer for that tick fires only now.
    expect(await app.get(JobsCronScheduler).enqueueTick(handler, new Date(done.scheduledFor))).toBe(false);
    const sameTick = await app.connection
      .collection('jobs')
      .countDocuments({ 'payload.scheduledFor': done.scheduledFor });
    expect(sameTick).toBe(1);
  });

  it('fails bootstrap when cron is used without ScheduleModule.forRoot()', async () => {
    const error = await createJobsTestApp({
      dbName: uniqueDatabaseName('cron_nosched'),
      providers: [CronHandlers],
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as Error).message).toContain('needs ScheduleModule.forRoot()');
  });

  it.each([
    [{ cron: 'not a cron' }, "@JobHandler('bad-cron').cron on BadCron.run"],
    [{ cron: '* * * * *', timeZone: 'Mars/Olympus' }, "@JobHandler('bad-cron').timeZone on BadCron.run"],
  ])('fails bootstrap on %j naming the handler', async (options, message) => {
    @Injectable()
    class BadCron {
      @JobHandler('bad-cron', options)
      run() {}
    }
    const error = await start(uniqueDatabaseName('cron_bad'), 'a', [BadCron]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as Error).message).toContain(message);
  });
});
