import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { Injectable, Logger, type Type } from '@nestjs/common';
import { Cron, ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import { CronJob, CronTime } from 'cron';
import { Settings } from 'luxon';
import { InvalidOptionError, type JobExecutionContext, JobHandler } from '../../lib';
import { JobHandlerRegistry } from '../../lib/handlers/job-handler.registry';
import { JobsCronScheduler } from '../../lib/schedule/jobs-cron.scheduler';
import { ZonedCronTime } from '../../lib/schedule/zoned-cron-time';
import { createIndexReady } from '../support/indexes';
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

@Injectable()
class NightlyNewYork {
  @JobHandler('nightly', { cron: '30 1 * * *', timeZone: 'America/New_York' })
  run() {}
}

@Injectable()
class Monthly {
  @JobHandler('monthly', { cron: '0 0 1 * *' })
  run() {}
}

@Injectable()
class EverySecondUtc {
  @JobHandler('stalled', { cron: '* * * * * *' })
  run() {}
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
    Settings.now = () => Date.now();
    jest.restoreAllMocks();
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
      const insert = app.stores.enqueue.insert.bind(app.stores.enqueue);
      app.stores.enqueue.insert = async (doc) => {
        const outcome = await insert(doc);
        if (doc.scheduleKey !== undefined) attempts[outcome.kind === 'inserted' ? 'won' : 'lost'] += 1;
        return outcome;
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

  it('reports a tick that an application’s own unique index rejects, instead of taking it for a duplicate tick', async () => {
    const dbName = uniqueDatabaseName('cron_foreign_index');
    const app = await start(dbName, 'a');
    await waitFor(() => runs.length >= 1, 'a first tick', 4_000);
    // An application index that allows one job per name: every later tick clashes on it, not on its own key.
    await app.connection.collection('jobs').deleteMany({});
    await createIndexReady(app.connection.collection('jobs'), { name: 1 }, { name: 'one_per_name', unique: true });
    const handler = app.get(JobHandlerRegistry).get('every-second');
    if (!handler) throw new Error('handler not registered');
    const scheduler = app.get(JobsCronScheduler);
    expect(await scheduler.enqueueTick(handler, new Date('2030-01-01T00:00:00Z'))).toBe(true);
    await expect(scheduler.enqueueTick(handler, new Date('2030-01-01T00:00:01Z'))).rejects.toMatchObject({
      name: 'UniqueIndexRejectedJobError',
      indexName: 'one_per_name',
    });
    await app.connection.collection('jobs').dropIndex('one_per_name');
  });

  it('inserts one job for an occurrence that two instances fire on either side of a clock change', async () => {
    // The instances' clocks (luxon's, which the library reads) run from a chosen instant at real speed.
    const setClock = (iso: string) => {
      const [base, setAt] = [Date.parse(iso), Date.now()];
      Settings.now = () => base + (Date.now() - setAt);
    };
    const registered = (app: JobsTestApp) => app.get(SchedulerRegistry).getCronJob('nestjs-mongo-jobs:nightly');
    const fire = (app: JobsTestApp) => registered(app).fireOnTick();
    const dbName = uniqueDatabaseName('cron_dst');
    setClock('2024-11-02T12:00:00Z');
    const [a, b] = [await start(dbName, 'a', [NightlyNewYork]), await start(dbName, 'b', [NightlyNewYork])];
    const inserts = { started: 0, settled: 0 };
    const countInserts = (app: JobsTestApp) => {
      const insert = app.stores.enqueue.insert.bind(app.stores.enqueue);
      app.stores.enqueue.insert = (doc) => {
        inserts.started += 1;
        return insert(doc).finally(() => {
          inserts.settled += 1;
        });
      };
    };
    countInserts(a);
    countInserts(b);
    // The registered job's timer (and nextDate(), which apps read) runs on the same ticks.
    const nextAfter = (iso: string) => registered(a).cronTime.getNextDateFrom(new Date(iso)).toJSDate();
    expect(nextAfter('2024-11-02T12:00:00Z')).toEqual(new Date('2024-11-03T05:30:00Z'));
    expect(nextAfter('2024-11-03T06:10:00Z')).toEqual(new Date('2024-11-04T06:30:00Z'));
    // What apps read: nextDate() starts from the clock as a luxon DateTime (cron's own math says 06:30Z today). The
    // cron package loads luxon's CommonJS build, whose Settings.now setClock does not reach: stop Date.now instead.
    jest.spyOn(Date, 'now').mockReturnValue(Date.parse('2024-11-03T06:10:00Z'));
    const nextDate = registered(a).nextDate().toJSDate();
    jest.mocked(Date.now).mockRestore();
    expect(nextDate).toEqual(new Date('2024-11-04T06:30:00Z'));
    // 01:30 New York is shown at 05:30Z (EDT) and again at 06:30Z (EST). A fires on time; B's timer only after both.
    setClock('2024-11-03T05:30:00.010Z');
    await fire(a);
    setClock('2024-11-03T06:35:00Z');
    await fire(b);
    // C starts during the repeated hour and must not treat the second 01:30 as a new occurrence.
    const c = await start(dbName, 'c', [NightlyNewYork]);
    countInserts(c);
    await fire(c);
    await waitFor(() => inserts.settled === inserts.started, 'the inserts');
    expect(inserts.started).toBe(2);
    const keys = (await a.connection.collection('jobs').find({ name: 'nightly' }).toArray()).map(
      (row) => row.scheduleKey,
    );
    expect(keys).toEqual(['cron:nightly:2024-11-03T05:30:00.000Z']);
  });

  it('after a stall enqueues the latest tick and logs how many it missed', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn');
    // A stopped clock (luxon's, which the library reads): cron's own timer only ever fires early and is ignored.
    const stopClock = (iso: string) => {
      const at = Date.parse(iso);
      Settings.now = () => at;
    };
    stopClock('2026-01-01T10:00:00.100Z');
    const app = await start(uniqueDatabaseName('cron_stall'), 'a', [EverySecondUtc]);
    // The event loop stalls for 3.2 s: ticks 10:00:01 and 10:00:02 fall due, the timer fires once, at 10:00:03.3.
    stopClock('2026-01-01T10:00:03.300Z');
    await app.get(SchedulerRegistry).getCronJob('nestjs-mongo-jobs:stalled').fireOnTick();
    const message = String(warn.mock.calls.find(([m]) => String(m).includes('missed'))?.[0]);
    expect(message).toBe(
      'stalled: this instance missed 2 tick(s) from 2026-01-01T10:00:01.000Z to 2026-01-01T10:00:02.000Z ' +
        '(timer late); enqueueing only the latest, 2026-01-01T10:00:03.000Z. Another instance may have enqueued the ' +
        'missed ones.',
    );
    const keys = async () =>
      (await app.connection.collection('jobs').find({ name: 'stalled' }).toArray()).map((row) => row.scheduleKey);
    await waitFor(async () => (await keys()).length > 0, 'the latest tick');
    expect(await keys()).toEqual(['cron:stalled:2026-01-01T10:00:03.000Z']);
  });

  it('skips and logs a due tick older than the catch-up window (a process suspended for weeks)', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn');
    const stopClock = (iso: string) => {
      const at = Date.parse(iso);
      Settings.now = () => at;
    };
    stopClock('2025-12-31T23:00:00Z');
    const app = await start(uniqueDatabaseName('cron_too_old'), 'a', [Monthly]);
    // The 2026-01-01 tick fell due while the process was suspended; it wakes three weeks later.
    stopClock('2026-01-22T00:00:00Z');
    await app.get(SchedulerRegistry).getCronJob('nestjs-mongo-jobs:monthly').fireOnTick();
    const message = String(warn.mock.calls.find(([m]) => String(m).includes('catch-up window'))?.[0]);
    expect(message).toBe(
      'monthly: not enqueueing the tick of 2026-01-01T00:00:00.000Z: it is older than the catch-up window (24 h)',
    );
    expect(await app.connection.collection('jobs').countDocuments({ name: 'monthly' })).toBe(0);
  });

  it('fails bootstrap on one bad schedule before any schedule is registered or started', async () => {
    const added = jest.spyOn(SchedulerRegistry.prototype, 'addCronJob');
    const started = jest.spyOn(CronJob.prototype, 'start');
    @Injectable()
    class GoodThenBad {
      @JobHandler('good', { cron: '* * * * * *' })
      good() {}

      @JobHandler('bad', { cron: '0 0 30 2 *' })
      bad() {}
    }
    const error = await start(uniqueDatabaseName('cron_one_bad'), 'a', [GoodThenBad]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect((error as Error).message).toContain("@JobHandler('bad').cron on GoodThenBad.bad: never matches a date");
    expect(added.mock.calls.map(([name]) => name).filter((name) => name.startsWith('nestjs-mongo-jobs:'))).toEqual([]);
    expect((started.mock.contexts as CronJob[]).filter((job) => job.cronTime instanceof ZonedCronTime)).toEqual([]);
  });

  it('reports an error other than "never matches" with its own message', async () => {
    // An upgraded cron package that parses expressions into a shape we cannot read.
    jest
      .spyOn(CronTime.prototype as unknown as { _parse(source: string): void }, '_parse')
      .mockImplementation(() => {});
    const error = await start(uniqueDatabaseName('cron_unreadable'), 'a', [EverySecondUtc]).catch((e: unknown) => e);
    expect((error as Error).message).toBe('the installed cron package no longer exposes its parsed second field');
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
    [{ cron: '0 0 30 2 *' }, "@JobHandler('bad-cron').cron on BadCron.run: never matches a date"],
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
