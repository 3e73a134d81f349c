// A worker process for the chaos tests: a plain Nest application context on the BUILT package (dist/),
// started by test/support/chaos-cluster.ts. Plain CommonJS (no TypeScript, no decorators syntax), so it
// runs exactly what an app would load; Node >= 20.19 require()s the ESM-only Nest 12 packages.
//
// Configuration (environment):
//   CHAOS_JOBS_URI     MongoDB URI for the jobs (may point at a TcpProxy)
//   CHAOS_RECORD_URI   MongoDB URI for the execution records (direct to the server: never delayed or dropped)
//   CHAOS_DB           database name
//   CHAOS_WORKER_ID    workerId option
//   CHAOS_JOBS_OPTIONS JSON of JobsModule.forRoot options
//   CHAOS_MONGOOSE_OPTIONS JSON of extra MongooseModule.forRoot options (driver timeouts)
//   CHAOS_LIMITED      (optional) '1': also register chaos.limited (globalConcurrency 2)
//   CHAOS_PACKAGE      (optional) absolute path of the package to load instead of dist/, e.g. a deliberately
//                      broken copy, to check that the chaos tests catch the breakage
//
// Prints the driver's view of the server when it changes (heartbeats failing or back, the server's type, pools
// cleared), so a test that times out waiting for recovery shows whether the driver ever saw the server again.
//
// Protocol: prints `READY` on stdout once the application context is initialised. Over IPC it answers
// `{ type: 'status', id, timeoutMs }` with `{ type: 'status', id, status }` (JobsService.workerStatus()), and
// `{ type: 'enqueue', id, name, payload, options }` with `{ type: 'enqueued', id, job }` or `{ ..., error }`.
// SIGTERM closes the app (graceful shutdown) and exits 0; losing the parent (IPC disconnect) exits 1.
'use strict';

require('reflect-metadata');
const { Inject, Injectable, Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { getConnectionToken, MongooseModule } = require('@nestjs/mongoose');
const { MongoClient } = require('mongodb');
const { JobHandler, JobsModule, JobsService } = require(process.env.CHAOS_PACKAGE || '../../dist');

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`chaos-worker: ${name} is not set`);
  return value;
};

const workerId = env('CHAOS_WORKER_ID');
const dbName = env('CHAOS_DB');
const jobsOptions = JSON.parse(process.env.CHAOS_JOBS_OPTIONS || '{}');
const mongooseOptions = JSON.parse(process.env.CHAOS_MONGOOSE_OPTIONS || '{}');
const recordClient = new MongoClient(env('CHAOS_RECORD_URI'), { maxPoolSize: 4 });
const records = recordClient.db(dbName).collection('executions');

// Checking the signal this often bounds how late the handler notices an abort (and how stale a
// recorded deadline can be).
const TICK_MS = 10;
/** Ticks remembered for `notRunningAtAbortMs`: the last 2 s or so. */
const LATE_TICKS_KEPT = 200;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The chaos job: "works" for `payload.ms`, stopping as soon as its signal aborts, and records what it
 * saw in `executions`: start, end, the lease deadlines it held, when and why it was aborted, and how
 * far past its deadline it ever ran without being aborted. Every lease-related time is this worker's
 * clock (all processes share one machine, so one clock).
 */
class ChaosHandlers {
  async sleep(payload, ctx) {
    const start = Date.now();
    // `laterMs` (optional) is the duration of every execution after the first claim: a long first run that a
    // test takes away, then a quick rerun.
    const ms = ctx.fencingToken > 1 && payload.laterMs !== undefined ? payload.laterMs : payload.ms;
    const abortedAtStart = ctx.signal.aborted;
    let abortedAt;
    let deadlineAtAbort;
    ctx.signal.addEventListener(
      'abort',
      () => {
        abortedAt = Date.now();
        deadlineAtAbort = ctx.leaseExpiresAt.getTime();
      },
      { once: true },
    );
    const record = {
      jobId: ctx.jobId,
      fencingToken: ctx.fencingToken,
      lockId: ctx.lockId,
      workerId,
      pid: process.pid,
      attempt: ctx.attempt,
      ms,
      start,
      deadline: ctx.leaseExpiresAt.getTime(),
      initialDeadline: ctx.leaseExpiresAt.getTime(),
      abortedAtStart,
    };
    const { insertedId } = await records.insertOne(record);
    let recordedDeadline = record.deadline;
    let maxOverrunMs = Number.NEGATIVE_INFINITY;
    // The same, less how late the tick that saw it ran: the part of the overrun during which this process was running
    // (on a loaded machine a process may not be scheduled for a few hundred ms; no library can act meanwhile).
    let maxOverrunWhileRunningMs = Number.NEGATIVE_INFINITY;
    // How late each recent tick ran after its timer was due, to tell a late watchdog from a process not running.
    const lateTicks = [];
    let tickDueAt = Date.now();
    const until = start + ms;
    for (;;) {
      const now = Date.now();
      const lateMs = Math.max(0, now - tickDueAt);
      lateTicks.push({ at: now, lateMs });
      if (lateTicks.length > LATE_TICKS_KEPT) lateTicks.shift();
      const deadline = ctx.leaseExpiresAt.getTime();
      if (!ctx.signal.aborted) {
        maxOverrunMs = Math.max(maxOverrunMs, now - deadline);
        maxOverrunWhileRunningMs = Math.max(maxOverrunWhileRunningMs, now - deadline - lateMs);
      }
      if (deadline > recordedDeadline) {
        // Awaited: a kill after this line leaves the deadline this execution relied on on record.
        recordedDeadline = deadline;
        await records.updateOne({ _id: insertedId }, { $max: { deadline } });
      }
      if (ctx.signal.aborted || now >= until) break;
      const tickMs = Math.min(TICK_MS, until - now);
      tickDueAt = Date.now() + tickMs;
      await sleep(tickMs);
    }
    const end = Date.now();
    const reason = ctx.signal.reason;
    await records.updateOne(
      { _id: insertedId },
      {
        $set: {
          end,
          maxOverrunMs,
          stale: ctx.isStale,
          maxOverrunWhileRunningMs,
          ...(ctx.signal.aborted && {
            abortedAt: abortedAt ?? start,
            deadlineAtAbort: deadlineAtAbort ?? record.deadline,
            // The longest this process went unscheduled around the abort: a tick that ran late after the deadline.
            notRunningAtAbortMs: Math.max(
              0,
              ...lateTicks.filter((tick) => tick.at >= (deadlineAtAbort ?? record.deadline)).map((tick) => tick.lateMs),
            ),
            abortReason: reason?.name,
            leaseLostReason: reason?.reason,
          }),
        },
        $max: { deadline: ctx.leaseExpiresAt.getTime() },
      },
    );
  }
}
JobHandler('chaos.sleep')(
  ChaosHandlers.prototype,
  'sleep',
  Object.getOwnPropertyDescriptor(ChaosHandlers.prototype, 'sleep'),
);
Injectable()(ChaosHandlers);

// The same work under a fleet-wide limit: at most 2 executions at once across every worker process.
class LimitedChaosHandlers {
  constructor(handlers) {
    this.handlers = handlers;
  }

  limited(payload, ctx) {
    return this.handlers.sleep(payload, ctx);
  }
}
JobHandler('chaos.limited', { globalConcurrency: 2 })(
  LimitedChaosHandlers.prototype,
  'limited',
  Object.getOwnPropertyDescriptor(LimitedChaosHandlers.prototype, 'limited'),
);
Injectable()(LimitedChaosHandlers);
Inject(ChaosHandlers)(LimitedChaosHandlers, undefined, 0);

class ChaosWorkerModule {}
Module({
  imports: [
    MongooseModule.forRoot(env('CHAOS_JOBS_URI'), { dbName, ...mongooseOptions }),
    JobsModule.forRoot({ workerId, ...jobsOptions }),
  ],
  providers: process.env.CHAOS_LIMITED === '1' ? [ChaosHandlers, LimitedChaosHandlers] : [ChaosHandlers],
})(ChaosWorkerModule);

/** Set once the app is up; until then there is nothing to shut down gracefully. */
let stop = (code) => process.exit(code);
// The test runner went away (even by SIGKILL, which closes the IPC channel): never outlive it.
process.on('disconnect', () => stop(1));

/** One stdout line per change in what the driver sees of the server (not one per heartbeat). */
function logDriverView(client) {
  let last = '';
  const say = (line) => {
    if (line === last) return;
    last = line;
    process.stdout.write(`${new Date().toISOString()} driver: ${line}\n`);
  };
  client.on('serverHeartbeatFailed', (event) => say(`heartbeat failed: ${event.failure?.message}`));
  client.on('serverHeartbeatSucceeded', () => say('heartbeat ok'));
  client.on('serverDescriptionChanged', (event) => {
    const { type, error } = event.newDescription;
    say(`server ${event.previousDescription.type} -> ${type}${error ? ` (${error.message})` : ''}`);
  });
  client.on('connectionPoolCleared', () => say('pool cleared'));
}

async function main() {
  await recordClient.connect();
  const logger = process.env.JOBS_TEST_LOGS ? ['log', 'warn', 'error'] : ['error'];
  const app = await NestFactory.createApplicationContext(ChaosWorkerModule, { logger });
  const jobs = app.get(JobsService);
  logDriverView(app.get(getConnectionToken()).getClient());

  let stopping = false;
  stop = async (code) => {
    if (stopping) return;
    stopping = true;
    // A shutdown that hangs (database unreachable) must not keep the process around.
    setTimeout(() => process.exit(code === 0 ? 3 : code), 15_000).unref();
    await app.close();
    await recordClient.close();
    process.exit(code);
  };
  process.on('SIGTERM', () => stop(0));
  process.on('message', async (message) => {
    if (message && message.type === 'status') {
      const status = await jobs.workerStatus({ timeoutMs: message.timeoutMs });
      if (process.connected) process.send({ type: 'status', id: message.id, status });
    }
    if (message && message.type === 'enqueue') {
      const answer = await jobs.enqueue(message.name, message.payload, message.options).then(
        (job) => ({ job }),
        (error) => ({ error: { name: error?.name, message: error?.message } }),
      );
      if (process.connected) process.send({ type: 'enqueued', id: message.id, ...answer });
    }
  });
  process.stdout.write('READY\n');
}

main().catch((error) => {
  process.stderr.write(`chaos-worker ${workerId} failed to start: ${error?.stack}\n`);
  process.exit(2);
});
