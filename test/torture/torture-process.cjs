// One process of the generative fault checker (test/torture/run.ts starts them): a plain Nest application context
// on the BUILT package (dist/, or TORTURE_PACKAGE for a deliberately broken copy). Plain CommonJS, so it runs exactly
// what an app would load.
//
// Roles (TORTURE_ROLE):
//   worker  runs the poll loop (behind a FaultProxy or not, as TORTURE_JOBS_URI says)
//   driver  runs no poll loop; performs random operations (enqueue, enqueueMany, cancel, retry, runNow, purge, drain)
//           drawn from TORTURE_SEED until the parent sends `stop`, then exits 0
//
// Every process registers the same handlers (runNow executes in the calling process) and appends JSON lines to its
// own history file (TORTURE_HISTORY) with fs.writeSync: a line written before a SIGKILL is never lost.
//   call-start / call-lease / call-abort / call-end   a handler call (job, lock id, attempt, deadlines, how it ended)
//   event                                             a JobsService event of this process (completed, stale, dead…)
//   op / op-answer                                    a driver operation and its answer (or error)
//   close-start / close-end                           a graceful shutdown (SIGTERM) and how long app.close() took
//   crash                                             an unhandled rejection or uncaught exception
//   startup-failed                                    the application context could not start (faults at bootstrap)
//   log                                               a warning or error the library logged (what it decided, and why)
'use strict';

require('reflect-metadata');
const { openSync, writeSync } = require('node:fs');
const { Injectable, Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { MongooseModule } = require('@nestjs/mongoose');
const { JobHandler, JobsModule, JobsService } = require(process.env.TORTURE_PACKAGE || '../../dist');

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`torture-process: ${name} is not set`);
  return value;
};

const processId = env('TORTURE_PROCESS_ID');
const role = env('TORTURE_ROLE');
const names = JSON.parse(env('TORTURE_NAMES'));
const jobsOptions = JSON.parse(env('TORTURE_JOBS_OPTIONS'));
const mongooseOptions = JSON.parse(process.env.TORTURE_MONGOOSE_OPTIONS || '{}');
const history = openSync(env('TORTURE_HISTORY'), 'a');

/** Appends one history line, synchronously: it is on disk before the next statement runs. */
function record(line) {
  writeSync(history, `${JSON.stringify({ t: Date.now(), p: processId, ...line })}\n`);
}

process.on('unhandledRejection', (reason) => {
  record({ type: 'crash', kind: 'unhandledRejection', error: String(reason?.stack ?? reason).slice(0, 2000) });
  process.exit(70);
});
process.on('uncaughtException', (error) => {
  record({ type: 'crash', kind: 'uncaughtException', error: String(error?.stack ?? error).slice(0, 2000) });
  process.exit(70);
});

// How often a handler looks at its signal and lease: bounds how late it notices an abort or a new deadline.
const TICK_MS = 10;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
let callSeq = 0;

/**
 * The one handler behind every name; the payload says what it does:
 *   ms        how long it works
 *   fail      throw a planned error at the end (every attempt: 'always', or only attempts below it: a number)
 *   ignore    keep working after the signal aborts (until `ms` is over)
 *   settleMs  after an abort, take this long to wind down, then reject with the abort reason (honouring it, late)
 *   extendMs  call extendLockTime(extendMs) half-way through
 *   progress  call updateProgress every ~100 ms
 *   log       call ctx.log this many times at the start
 */
async function work(name, payload, ctx) {
  callSeq += 1;
  const call = `${processId}/${callSeq}`;
  const start = Date.now();
  let deadline = ctx.leaseExpiresAt.getTime();
  record({
    type: 'call-start',
    call,
    job: ctx.jobId,
    name,
    lock: ctx.lockId,
    attempt: ctx.attempt,
    fencing: ctx.fencingToken,
    group: payload.group ?? null,
    deadline,
    ignore: Boolean(payload.ignore),
  });
  // The runner's state-keyed triggers wait for handler starts (test/torture/triggers.ts). With a callback, a send
  // on a closed channel fails quietly instead of emitting an error.
  if (process.connected) {
    process.send(
      {
        type: 'call-start',
        job: ctx.jobId,
        name,
        group: payload.group ?? null,
        shape: payload.shape,
        plant: payload.plant,
      },
      () => undefined,
    );
  }
  let abortedAt;
  ctx.signal.addEventListener(
    'abort',
    () => {
      abortedAt = Date.now();
      record({ type: 'call-abort', call, job: ctx.jobId, reason: ctx.signal.reason?.name, deadline });
    },
    { once: true },
  );
  // ctx.log is newer than some builds the checker runs against (a build under test without it skips the lines).
  if (typeof ctx.log === 'function') for (let i = 0; i < (payload.log ?? 0); i += 1) ctx.log(`${call} line ${i}`);
  const until = start + (payload.ms ?? 0);
  let extended = false;
  let lastProgress = start;
  const note = (what) => (error) => record({ type: 'call-note', call, job: ctx.jobId, note: what, error: error?.name });
  for (;;) {
    const now = Date.now();
    const current = ctx.leaseExpiresAt.getTime();
    if (current !== deadline) {
      deadline = current;
      record({ type: 'call-lease', call, job: ctx.jobId, deadline });
    }
    if (now >= until) break;
    if (abortedAt !== undefined && !payload.ignore && now >= abortedAt + (payload.settleMs ?? 0)) break;
    if (payload.extendMs && !extended && now >= start + payload.ms / 2) {
      extended = true;
      ctx.extendLockTime(payload.extendMs).catch(note('extend-rejected'));
    }
    if (payload.progress && now - lastProgress >= 100) {
      lastProgress = now;
      ctx
        .updateProgress(Math.min(100, Math.floor(((now - start) / payload.ms) * 100)))
        .catch(note('progress-rejected'));
    }
    await sleep(Math.min(TICK_MS, until - now));
  }
  const aborted = ctx.signal.aborted;
  const failing = payload.fail === 'always' || (typeof payload.fail === 'number' && ctx.attempt < payload.fail);
  const how = aborted && !payload.ignore ? 'threw-abort' : failing ? 'threw' : 'resolved';
  record({
    type: 'call-end',
    call,
    job: ctx.jobId,
    how,
    aborted,
    reason: aborted ? ctx.signal.reason?.name : undefined,
    leaseLost: ctx.isStale || ctx.signal.reason?.name === 'LeaseLostError',
    ignoredSignal: aborted && Boolean(payload.ignore),
    deadline: ctx.leaseExpiresAt.getTime(),
  });
  if (how === 'threw-abort') throw ctx.signal.reason;
  if (how === 'threw') throw new Error('planned failure');
  return { call };
}

class TortureHandlers {}
for (const { name, options } of names) {
  const method = `run_${name.replace(/\W/g, '_')}`;
  TortureHandlers.prototype[method] = (payload, ctx) => work(name, payload ?? {}, ctx);
  JobHandler(name, options)(
    TortureHandlers.prototype,
    method,
    Object.getOwnPropertyDescriptor(TortureHandlers.prototype, method),
  );
}
Injectable()(TortureHandlers);

class TortureModule {}
Module({
  imports: [
    MongooseModule.forRoot(env('TORTURE_JOBS_URI'), { dbName: env('TORTURE_DB'), ...mongooseOptions }),
    JobsModule.forRoot({ workerId: processId, ...jobsOptions, worker: role === 'worker' }),
  ],
  providers: [TortureHandlers],
})(TortureModule);

let stop = (code) => process.exit(code);
// The runner went away (even by SIGKILL, which closes the IPC channel): never outlive it.
process.on('disconnect', () => stop(1));

/**
 * The library's warnings and errors go into the history: the checker reads what a worker decided (a claim in doubt it
 * could neither read back nor hand back in time), and a violation can be explained from them. Errors still reach
 * stderr; everything does with JOBS_TEST_LOGS set.
 */
const verbose = Boolean(process.env.JOBS_TEST_LOGS);
const print = (level, message, context) =>
  process.stderr.write(`${processId} ${level} [${context ?? ''}] ${message}\n`);
const historyLogger = {
  log: (message, context) => verbose && print('log', message, context),
  warn: (message, context) => {
    record({ type: 'log', level: 'warn', message: String(message).slice(0, 600) });
    if (verbose) print('warn', message, context);
  },
  error: (message, trace, context) => {
    record({ type: 'log', level: 'error', message: String(message).slice(0, 600) });
    print('error', message, context ?? trace);
  },
  debug: () => undefined,
  verbose: () => undefined,
};

async function main() {
  const app = await NestFactory.createApplicationContext(TortureModule, { logger: historyLogger });
  const jobs = app.get(JobsService);
  jobs.events$.subscribe((event) => {
    if (event.type === 'renewed' || event.type === 'progress' || event.type === 'started') return;
    record({ type: 'event', event: event.type, job: event.jobId, attempt: event.attempt, error: event.error });
  });
  let stopping = false;
  stop = async (code) => {
    if (stopping) return;
    stopping = true;
    // A shutdown that hangs must not keep the process around: recorded, then the process goes.
    setTimeout(() => {
      record({ type: 'close-hung' });
      process.exit(3);
    }, 30_000).unref();
    const started = Date.now();
    record({ type: 'close-start' });
    await app.close();
    record({ type: 'close-end', ms: Date.now() - started });
    process.exit(code);
  };
  process.on('SIGTERM', () => stop(0));
  if (role === 'driver') {
    const { runDriver } = require('./torture-driver.cjs');
    const done = runDriver(jobs, record, JSON.parse(env('TORTURE_DRIVER')));
    process.on('message', (message) => {
      if (message?.type === 'stop') void done.stop().then(() => stop(0));
      if (message?.type === 'trigger') done.trigger(message);
      if (message?.type === 'plant') done.plant(message);
    });
  }
  process.stdout.write('READY\n');
}

main().catch((error) => {
  // A bootstrap that fails under faults is a documented failure (the runner starts the process again), not a crash.
  record({ type: 'startup-failed', error: String(error?.stack ?? error).slice(0, 2000) });
  process.stderr.write(`torture-process ${processId} failed to start: ${error?.stack}\n`);
  process.exit(2);
});
