import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Injectable } from '@nestjs/common';
import { getConnectionToken } from '@nestjs/mongoose';
import { MongoClient, type ObjectId } from 'mongodb';
import type { Connection } from 'mongoose';
import { JobHandler, JobsService } from '../../lib';
import {
  type BenchContext,
  benchDbName,
  CommandCounter,
  createBenchApp,
  createJobIndexes,
  dropDatabase,
  pendingJobDoc,
} from './bench-app';
import { type BenchConfig, fmt, fmtInt, formatTable, log, medianOf, nowMs, withTimeout } from './helpers';

const JOB = 'bench.noop';
const TRIAL_TIMEOUT_MS = 180_000;
/** Agenda 6 keeps its MongoDB backend in a separate package (peer of agenda 6.2.6); see ensureAgendaBackend. */

/**
 * The `raw…` variants are diagnostics (run them with BENCH_THROUGHPUT_TARGETS): `+reclaim` adds the library's
 * expired-lease findOneAndUpdate before every claim; `-serial-claim` claims from one loop, one claim in flight at a
 * time, completions running concurrently, like the library's poll loop. `raw-serial-claim+reclaim` is the library's
 * protocol and loop shape without the library. Together they split the gap to the raw loop into its causes.
 */
const SYSTEMS = ['library', 'raw', 'agenda', 'raw+reclaim', 'raw-serial-claim', 'raw-serial-claim+reclaim'] as const;
/** The library's default: a busy worker re-claims as soon as a slot frees, so the interval only paces idle polls. */
const LIBRARY_POLL_INTERVAL_MS = 1000;
const DEFAULT_SYSTEMS: ThroughputSystem[] = ['library', 'raw', 'agenda'];
export type ThroughputSystem = (typeof SYSTEMS)[number];

export interface ThroughputTrial {
  system: ThroughputSystem;
  jobs: number;
  /** Time to store all jobs (excluded from throughput). */
  enqueueMs: number;
  /** From "all enqueued" to "all completed". */
  runMs: number;
  jobsPerSecond: number;
  /** Jobs already completed when the enqueue returned (the worker was live during it); 0 for raw and Agenda. */
  completedDuringEnqueue: number;
  /** This process's CPU (user+system) per job during the run: the client-side cost. */
  clientCpuMsPerJob: number;
  /** The server process's CPU per job, when its pid is known (the Java server): the server-side cost. */
  serverCpuMsPerJob: number | null;
  /** Commands sent per job during the run, by kind (command monitoring is on for all three systems alike). */
  commandsPerJob: Record<string, number>;
}

export interface ThroughputReport {
  config: { jobs: number; concurrency: number; libraryPollIntervalMs: number; agenda: Record<string, number> };
  trials: Array<ThroughputTrial | { system: ThroughputSystem; error: string }>;
  medians: Record<string, { jobsPerSecond: number; enqueueJobsPerSecond: number; ratioToRaw: number } | string>;
  table: string;
}

/** The smallest handler there is: what is measured is the library's own cost per job. */
@Injectable()
class NoopJobs {
  @JobHandler(JOB)
  noop(): void {}
}

export async function runThroughput(ctx: BenchContext, config: BenchConfig, serverPid: number | null) {
  const systems = SYSTEMS.filter((s) =>
    config.throughputTargets ? config.throughputTargets.includes(s) : DEFAULT_SYSTEMS.includes(s),
  );
  const agendaConfig = {
    processEveryMs: Number(process.env.BENCH_AGENDA_PROCESS_EVERY_MS ?? 10),
    lockLimit: Number(process.env.BENCH_AGENDA_LOCK_LIMIT ?? config.throughputConcurrency * 2),
  };
  const trials: ThroughputReport['trials'] = [];
  await warmUp(ctx, config, systems, agendaConfig);
  for (let rep = 1; rep <= config.repetitions; rep += 1) {
    // Rotate the order, so no system always runs first (or right after the slowest one).
    const order = systems.map((_, i) => systems[(i + rep - 1) % systems.length]);
    for (const system of order) {
      log(`throughput rep ${rep}/${config.repetitions}: ${system}, ${config.throughputJobs} jobs`);
      const cpu = new CpuMeter(serverPid);
      try {
        const run =
          system === 'library'
            ? await libraryTrial(ctx, config, cpu, system)
            : system === 'agenda'
              ? await agendaTrial(ctx, config, cpu, agendaConfig)
              : await rawTrial(ctx, config, cpu, system);
        trials.push(run);
        log(`  ${fmtInt(run.jobsPerSecond)} jobs/s (run ${fmtInt(run.runMs)} ms, enqueue ${fmtInt(run.enqueueMs)} ms)`);
      } catch (error) {
        const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
        log(`  ${system} failed: ${reason}`);
        trials.push({ system, error: reason });
        // A system that cannot run on this server will not run on the next repetition either.
        if (system === 'agenda') systems.splice(systems.indexOf(system), 1);
      }
    }
  }
  return summarize(trials, config, agendaConfig);
}

/**
 * A short discarded run of each system first: the Java server's JIT (and V8's) would otherwise make the first
 * measured trial the slowest, whichever system it is.
 */
async function warmUp(
  ctx: BenchContext,
  config: BenchConfig,
  systems: readonly ThroughputSystem[],
  agenda: { processEveryMs: number; lockLimit: number },
): Promise<void> {
  const small = { ...config, throughputJobs: Math.min(500, config.throughputJobs) };
  log(`throughput warm-up: ${small.throughputJobs} jobs per system, not recorded`);
  const cpu = new CpuMeter(null);
  for (const system of systems) {
    if (system.startsWith('library')) await libraryTrial(ctx, small, cpu, system);
    // Agenda's failure, if any, is reported by the measured trials.
    else if (system === 'agenda') await agendaTrial(ctx, small, cpu, agenda).catch(() => undefined);
    else await rawTrial(ctx, small, cpu, system);
  }
}

function summarize(
  trials: ThroughputReport['trials'],
  config: BenchConfig,
  agenda: Record<string, number>,
): ThroughputReport {
  const ok = (system: ThroughputSystem) =>
    trials.filter((t): t is ThroughputTrial => t.system === system && !('error' in t));
  const rawMedian = medianOf(ok('raw'), (t) => t.jobsPerSecond);
  const medians: ThroughputReport['medians'] = {};
  const rows: string[][] = [];
  const breakdown: string[] = ['Commands per job during the run (last rep):'];
  const notes: string[] = [];
  for (const system of SYSTEMS) {
    const runs = ok(system);
    const failure = trials.find((t) => t.system === system && 'error' in t) as { error: string } | undefined;
    if (runs.length === 0) {
      if (failure) {
        medians[system] = `not run: ${failure.error}`;
        rows.push([system, 'not run', '', '', '', '', '', '', '']);
        notes.push(`${system} not run: ${failure.error}`);
      }
      continue;
    }
    const jobsPerSecond = medianOf(runs, (t) => t.jobsPerSecond);
    const enqueueJobsPerSecond = medianOf(runs, (t) => (t.jobs / t.enqueueMs) * 1000);
    const ratioToRaw = jobsPerSecond / rawMedian;
    medians[system] = { jobsPerSecond, enqueueJobsPerSecond, ratioToRaw };
    const speeds = runs.map((t) => t.jobsPerSecond);
    rows.push([
      system,
      fmtInt(jobsPerSecond),
      `${fmtInt(Math.min(...speeds))}–${fmtInt(Math.max(...speeds))}`,
      Number.isFinite(ratioToRaw) ? `${fmt(ratioToRaw, 2)}×` : '–',
      fmtInt(enqueueJobsPerSecond),
      fmt(
        medianOf(runs, (t) => t.clientCpuMsPerJob),
        3,
      ),
      fmt(
        medianOf(runs, (t) => t.serverCpuMsPerJob ?? undefined),
        3,
      ),
      fmt(
        medianOf(runs, (t) => Object.values(t.commandsPerJob).reduce((a, b) => a + b, 0)),
        2,
      ),
      String(runs.length),
    ]);
    const kinds = Object.entries(runs[runs.length - 1].commandsPerJob).map(
      ([kind, count]) => `${kind} ${fmt(count, 2)}`,
    );
    breakdown.push(`  ${system}: ${kinds.join(', ')}`);
  }
  const headers = ['system', 'jobs/s', 'min–max', 'vs raw', 'enqueue jobs/s', 'client CPU ms/job'];
  headers.push('server CPU ms/job', 'cmds/job', 'reps');
  const title = `1. Throughput: ${config.throughputJobs} no-op jobs, one process, concurrency ${config.throughputConcurrency} (medians)`;
  const table = [formatTable(title, headers, rows), ...breakdown, ...notes].join('\n');
  return {
    config: {
      jobs: config.throughputJobs,
      concurrency: config.throughputConcurrency,
      libraryPollIntervalMs: LIBRARY_POLL_INTERVAL_MS,
      agenda,
    },
    trials,
    medians,
    table,
  };
}

/** This library: a Nest app with MongooseModule + JobsModule.forRoot and a no-op @JobHandler. */
async function libraryTrial(
  ctx: BenchContext,
  config: BenchConfig,
  cpu: CpuMeter,
  system: ThroughputSystem,
): Promise<ThroughputTrial> {
  const n = config.throughputJobs;
  const dbName = benchDbName('tp_lib');
  const app = await createBenchApp(
    ctx.uri,
    dbName,
    { concurrency: config.throughputConcurrency, pollIntervalMs: LIBRARY_POLL_INTERVAL_MS },
    [NoopJobs],
    { monitorCommands: true },
  );
  try {
    const jobs = app.get(JobsService);
    const commands = new CommandCounter(app.get<Connection>(getConnectionToken()).getClient() as never);
    let completed = 0;
    const allDone = countdown(n);
    // `completed` is emitted after the owner-fenced completion write landed: the job is done in the database.
    const subscription = jobs.events$.subscribe((event) => {
      if (event.type === 'completed') {
        completed += 1;
        allDone.tick();
      }
    });
    const items = Array.from({ length: n }, (_, i) => ({ name: JOB, payload: { i } }));
    const t0 = nowMs();
    // One bulk insert; the running worker is woken by it (and may start on the first rows on a real mongod).
    await jobs.enqueueMany(items);
    const t1 = nowMs();
    const completedDuringEnqueue = completed;
    cpu.start();
    commands.start();
    await withTimeout(allDone.promise, TRIAL_TIMEOUT_MS, 'library throughput');
    const t2 = nowMs();
    subscription.unsubscribe();
    return trial(system, n, t1 - t0, t2 - t1, completedDuringEnqueue, cpu.stop(n), commands.stop(n));
  } finally {
    await app.close();
    await dropDatabase(ctx.client.db(dbName));
  }
}

/**
 * The floor: the same collection shape and indexes, one findOneAndUpdate claim (same filter and sort) plus one
 * owner-fenced updateOne completion per job, `concurrency` loops at once. No leases, events, Nest, or retries.
 */
async function rawTrial(
  ctx: BenchContext,
  config: BenchConfig,
  cpu: CpuMeter,
  system: ThroughputSystem,
): Promise<ThroughputTrial> {
  const n = config.throughputJobs;
  const dbName = benchDbName('tp_raw');
  // Its own client, like the library's own mongoose connection: both start with a cold pool.
  const client = await MongoClient.connect(ctx.uri, { monitorCommands: true });
  const commands = new CommandCounter(client);
  const collection = client.db(dbName).collection('jobs');
  try {
    await createJobIndexes(collection);
    const docs = Array.from({ length: n }, (_, i) => pendingJobDoc(JOB, { i }));
    const t0 = nowMs();
    await collection.insertMany(docs as never[], { ordered: false });
    const t1 = nowMs();
    cpu.start();
    commands.start();
    let completed = 0;
    let sequence = 0;
    const claim = async (): Promise<{ _id: ObjectId; lockId: string } | null> => {
      const at = new Date();
      sequence += 1;
      const lockId = `raw#${sequence}`;
      const lockedUntil = new Date(at.getTime() + 30_000);
      const set = { status: 'running', lockedBy: lockId, lockedUntil, startedAt: at, updatedAt: at };
      if (system.endsWith('+reclaim')) {
        // What the library's claimNext does first: look for a running row whose lease ran out (there is none).
        const reclaimed = await collection.findOneAndUpdate(
          { status: 'running', lockedUntil: { $lte: at } },
          { $set: set, $inc: { attemptCount: 1, fencingToken: 1 } },
          { sort: { lockedUntil: 1, _id: 1 }, returnDocument: 'after' },
        );
        if (reclaimed) return { _id: reclaimed._id, lockId };
      }
      const job = await collection.findOneAndUpdate(
        { status: 'pending', runAt: { $lte: at } },
        { $set: set, $inc: { fencingToken: 1 } },
        { sort: { priority: -1, runAt: 1, _id: 1 }, returnDocument: 'after' },
      );
      return job && { _id: job._id, lockId };
    };
    const complete = async (job: { _id: ObjectId; lockId: string }): Promise<void> => {
      const finishedAt = new Date();
      const result = await collection.updateOne(
        { _id: job._id, lockedBy: job.lockId, status: 'running' },
        {
          $set: { status: 'completed', finishedAt, updatedAt: finishedAt },
          $unset: { lockedBy: '', lockedUntil: '', dedupeKey: '', lastError: '' },
        },
      );
      if (result.matchedCount === 1) completed += 1;
    };
    const loop = async (): Promise<void> => {
      for (let job = await claim(); job; job = await claim()) await complete(job);
    };
    /** One claimer, completions run concurrently up to `concurrency`: the shape of the library's poll loop. */
    const serialClaimer = async (): Promise<void> => {
      const running = new Set<Promise<void>>();
      for (;;) {
        if (running.size >= config.throughputConcurrency) await Promise.race(running);
        const job = await claim();
        if (!job) break;
        const done: Promise<void> = complete(job).finally(() => running.delete(done));
        running.add(done);
      }
      await Promise.all(running);
    };
    const work: Promise<unknown> = system.startsWith('raw-serial-claim')
      ? serialClaimer()
      : Promise.all(Array.from({ length: config.throughputConcurrency }, loop));
    await withTimeout(work, TRIAL_TIMEOUT_MS, `${system} throughput`);
    const t2 = nowMs();
    if (completed !== n) throw new Error(`${system} completed ${completed} of ${n} jobs`);
    return trial(system, n, t1 - t0, t2 - t1, 0, cpu.stop(n), commands.stop(n));
  } finally {
    await dropDatabase(client.db(dbName));
    await client.close();
  }
}

interface AgendaModule {
  Agenda: new (options: Record<string, unknown>) => AgendaLike;
}
interface AgendaLike {
  ready: Promise<void>;
  define(name: string, processor: () => Promise<void>, options?: Record<string, unknown>): void;
  create(name: string, data: unknown): { save(): Promise<unknown> };
  on(event: string, listener: (...args: unknown[]) => void): void;
  start(): Promise<void>;
  stop(closeConnection?: boolean): Promise<void>;
}
interface AgendaBackendModule {
  MongoBackend: new (options: Record<string, unknown>) => unknown;
}

/** Agenda 6 with its MongoDB backend: maxConcurrency = concurrency, processEvery small, lock limit 2× concurrency. */
async function agendaTrial(
  ctx: BenchContext,
  config: BenchConfig,
  cpu: CpuMeter,
  options: { processEveryMs: number; lockLimit: number },
): Promise<ThroughputTrial> {
  const n = config.throughputJobs;
  const [{ Agenda }, { MongoBackend }] = await Promise.all([
    import('agenda') as unknown as Promise<AgendaModule>,
    ensureAgendaBackend(),
  ]);
  const dbName = benchDbName('tp_agenda');
  const client = await MongoClient.connect(ctx.uri, { monitorCommands: true });
  const commands = new CommandCounter(client);
  const errors: string[] = [];
  const agenda = new Agenda({
    backend: new MongoBackend({ mongo: client.db(dbName) }),
    name: 'bench',
    processEvery: options.processEveryMs,
    maxConcurrency: config.throughputConcurrency,
    defaultConcurrency: config.throughputConcurrency,
    // Without a lock limit Agenda locks every due job (one at a time) before running any of them.
    lockLimit: options.lockLimit,
  });
  agenda.on('error', (error) => errors.push(error instanceof Error ? error.message : String(error)));
  let started = false;
  try {
    agenda.define(JOB, async () => {});
    await agenda.ready;
    const t0 = nowMs();
    // Agenda has no bulk enqueue; save with bounded parallelism (excluded from the throughput anyway).
    for (let offset = 0; offset < n; offset += 100) {
      const chunk = Array.from({ length: Math.min(100, n - offset) }, (_, i) => agenda.create(JOB, { i: offset + i }));
      await Promise.all(chunk.map((job) => job.save()));
    }
    const t1 = nowMs();
    const allDone = countdown(n);
    agenda.on('complete', () => allDone.tick());
    cpu.start();
    commands.start();
    started = true;
    await agenda.start();
    await withTimeout(
      Promise.race([
        allDone.promise,
        // Surface the first error instead of waiting out the timeout when Agenda cannot work on this server.
        new Promise<never>((_, reject) => {
          const timer = setInterval(() => {
            if (errors.length > 0) {
              clearInterval(timer);
              reject(new Error(errors[0]));
            }
          }, 50);
          void allDone.promise.then(() => clearInterval(timer));
        }),
      ]),
      TRIAL_TIMEOUT_MS,
      'agenda throughput',
    );
    const t2 = nowMs();
    return trial('agenda', n, t1 - t0, t2 - t1, 0, cpu.stop(n), commands.stop(n));
  } finally {
    if (started) await agenda.stop(false).catch(() => undefined);
    await dropDatabase(client.db(dbName));
    await client.close();
  }
}

/** Agenda 6 keeps its MongoDB backend in a separate package (a devDependency here). */
async function ensureAgendaBackend(): Promise<AgendaBackendModule> {
  const version = (name: string) =>
    JSON.parse(readFileSync(resolve('node_modules', name, 'package.json'), 'utf8')).version;
  log(`agenda ${version('agenda')} with @agendajs/mongo-backend ${version('@agendajs/mongo-backend')}`);
  return (await import('@agendajs/mongo-backend')) as unknown as AgendaBackendModule;
}

function trial(
  system: ThroughputSystem,
  jobs: number,
  enqueueMs: number,
  runMs: number,
  completedDuringEnqueue: number,
  cpu: { clientMsPerJob: number; serverMsPerJob: number | null },
  commandsPerJob: Record<string, number>,
): ThroughputTrial {
  return {
    system,
    jobs,
    enqueueMs,
    runMs,
    jobsPerSecond: (jobs / runMs) * 1000,
    completedDuringEnqueue,
    clientCpuMsPerJob: cpu.clientMsPerJob,
    serverCpuMsPerJob: cpu.serverMsPerJob,
    commandsPerJob,
  };
}

function countdown(n: number): { promise: Promise<void>; tick(): void } {
  let left = n;
  let resolveAll!: () => void;
  const promise = new Promise<void>((r) => {
    resolveAll = r;
  });
  return {
    promise,
    tick() {
      left -= 1;
      if (left === 0) resolveAll();
    },
  };
}

/** CPU time of this process and, on Linux with a known pid, of the server process. */
class CpuMeter {
  private client = process.cpuUsage();
  private server: number | null = null;

  constructor(private readonly serverPid: number | null) {}

  start(): void {
    this.client = process.cpuUsage();
    this.server = readProcessCpuMs(this.serverPid);
  }

  stop(jobs: number): { clientMsPerJob: number; serverMsPerJob: number | null } {
    const used = process.cpuUsage(this.client);
    const serverNow = readProcessCpuMs(this.serverPid);
    return {
      clientMsPerJob: (used.user + used.system) / 1000 / jobs,
      serverMsPerJob: serverNow === null || this.server === null ? null : (serverNow - this.server) / jobs,
    };
  }
}

/** utime + stime from /proc/<pid>/stat, in ms (clock ticks are 100 Hz on Linux). */
function readProcessCpuMs(pid: number | null): number | null {
  if (pid === null) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}
