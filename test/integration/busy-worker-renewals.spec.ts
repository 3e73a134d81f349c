import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { type Connection, Types } from 'mongoose';
import { type JobExecutionContext, JobHandler } from '../../lib';
import { createJobsTestApp, deferred, type JobsTestApp, waitFor } from '../support/jobs-app';
import { sleep } from '../support/sleep';
import { uniqueDatabaseName } from '../support/test-database';

const JOBS = 40;
const release = deferred();
const aborted = new Map<string, string>();

@Injectable()
class LongJobs {
  @JobHandler('long')
  async long(_payload: unknown, ctx: JobExecutionContext) {
    await Promise.race([
      release.promise,
      new Promise<void>((resolve) =>
        ctx.signal.addEventListener('abort', () => {
          aborted.set(ctx.jobId, (ctx.signal.reason as Error).name);
          resolve();
        }),
      ),
    ]);
    ctx.signal.throwIfAborted();
  }
}

/** Renewal commands: a findAndModify or an update fenced on lockedBy that moves lockedUntil forward. */
function isRenewal(command: Record<string, unknown>): { statements: number } | undefined {
  // Owner-fenced (`lockedBy` in the filter) and moving the deadline forward (`$max: { lockedUntil }`).
  const renewal = (filter: unknown, update: unknown) =>
    typeof filter === 'object' &&
    filter !== null &&
    'lockedBy' in filter &&
    (update as { $max?: { lockedUntil?: unknown } } | undefined)?.$max?.lockedUntil !== undefined;
  if (command.findAndModify && renewal(command.query, command.update)) return { statements: 1 };
  const updates = Array.isArray(command.updates) ? (command.updates as { q: unknown; u: unknown }[]) : [];
  if (updates.length > 0 && updates.every((u) => renewal(u.q, u.u))) return { statements: updates.length };
  return undefined;
}

describe('renewals of a busy worker', () => {
  let app: JobsTestApp;
  const renewals: { statements: number }[] = [];

  beforeAll(async () => {
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('busy_renewals'),
      // Renewals every 200 ms, as the counts below need; a lease ten times as long, so a loaded machine stalling the
      // test process for a few hundred ms loses no lease beside the victim's (a 600 ms lease left 400 ms of margin).
      options: { concurrency: JOBS, leaseMs: 2_000, heartbeatIntervalMs: 200, pollIntervalMs: 50 },
      providers: [LongJobs],
      mongoose: {
        monitorCommands: true,
        connectionFactory: (connection: Connection) => {
          connection.getClient().on('commandStarted', (event) => {
            const renewal = isRenewal(event.command);
            if (renewal) renewals.push(renewal);
          });
          return connection;
        },
      },
    });
  });
  afterAll(async () => {
    release.resolve();
    await app.close();
  });

  it('renews 40 running leases in far fewer round trips than leases, and a taken-over one goes stale alone', async () => {
    const jobs = await app.jobs.enqueueMany(Array.from({ length: JOBS }, () => ({ name: 'long' })));
    await waitFor(async () => (await app.jobs.stats()).running === JOBS, 'all jobs running');
    renewals.length = 0;
    // Another worker takes one row over: its next renewal matches nothing.
    const victim = jobs[7].id;
    await app.connection
      .collection('jobs')
      .updateOne({ _id: new Types.ObjectId(victim) }, { $set: { lockedBy: 'someone-else' } });
    await waitFor(() => aborted.has(victim), 'the taken-over job to be aborted', 5_000);
    // Five heartbeat intervals of steady state.
    await sleep(1_000);
    const statements = renewals.reduce((sum, r) => sum + r.statements, 0);
    expect(statements).toBeGreaterThanOrEqual((JOBS - 1) * 3); // every live lease renewed each interval or so
    expect(renewals.length).toBeLessThan(statements / 4); // …in batches, not one round trip each
    expect([...aborted.entries()]).toEqual([[victim, 'LeaseLostError']]);
    expect((await app.jobs.stats()).running).toBe(JOBS);
    release.resolve();
    // The "other owner" never renews, so its lease runs out and the victim is reclaimed here, its lost attempt counted.
    await waitFor(async () => (await app.jobs.stats()).completed === JOBS, 'every job to complete');
    expect(await app.jobs.findById(victim)).toMatchObject({
      attemptCount: 1,
      attempts: [{ errorClass: 'LeaseExpired' }],
    });
  });
});
