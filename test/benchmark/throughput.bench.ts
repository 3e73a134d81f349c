import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Injectable } from '@nestjs/common';
import { getConnectionToken } from '@nestjs/mongoose';
import { type Document, MongoClient, type ObjectId, type UpdateFilter } from 'mongodb';
import { type Connection, mongo } from 'mongoose';
import { JobHandler, type JobsModuleOptions, JobsService } from '../../lib';
import { MAX_ATTEMPT_HISTORY } from '../../lib/model/jobs.constants';
import { defaultWorkerId } from '../../lib/model/worker-id';
import {
  type BenchContext,
  benchDbName,
  CommandCounter,
  createBenchApp,
  createJobIndexes,
  dropDatabase,
  retriedJobDoc,
} from './bench-app';
import { CpuMeter } from './cpu-meter';
import { type BenchConfig, fmt, fmtInt, formatTable, log, medianOf, nowMs, withTimeout } from './helpers';
import {
  type Bound,
  fmtRatio,
  fmtSpread,
  judge,
  type RatioSpread,
  ratioSpread,
  type Spread,
  spreadOf,
  type TargetCheck,
} from './spread';
import { startWindowProfile } from './window-profile';

const JOB = 'bench.noop';
const TRIAL_TIMEOUT_MS = 180_000;

/**
 * The `raw…` variants are diagnostics (run them with BENCH_THROUGHPUT_TARGETS): `+reclaim` adds the library's
 * expired-lease findOneAndUpdate before every claim; `-serial-claim` claims from one loop, one claim in flight at a
 * time, completions running concurrently, like the library's poll loop. `raw-serial-claim+reclaim` is the library's
 * protocol and loop shape without the library. Together they split the gap to the raw loop into its causes.
 * `raw-batched` (run by default) is the library's batched protocol with nothing around it: the floor its client CPU per
 * job can reach on this driver and server, which puts a target stated against the unbatched raw loop in proportion.
 * Like the library it sends plain `find` and `update` commands; `raw-batched-helpers` sends the same commands through
 * the driver's `bulkWrite` and cursors (what the library did before), which shows what those helpers cost.
 * The order is the first round's; each later round rotates it (`roundOrder`).
 */
const SYSTEMS = [
  'raw',
  'library',
  'library-single-claims',
  'raw+reclaim',
  'raw-serial-claim',
  'raw-serial-claim+reclaim',
  'raw-batched',
  'raw-batched-helpers',
  'agenda',
] as const;
/** The library's default: a busy worker re-claims as soon as a slot frees, so the interval only paces idle polls. */
const LIBRARY_POLL_INTERVAL_MS = 1000;
/** The library's default lease, which the raw loop writes too (same `lockedUntil` distance, same document). */
const LEASE_MS = 30_000;
const DEFAULT_SYSTEMS: ThroughputSystem[] = ['raw', 'library', 'library-single-claims', 'raw-batched', 'agenda'];
export type ThroughputSystem = (typeof SYSTEMS)[number];

/** What the raw loop still does differently from the library's claim and completion (its queries are the same). */
const RAW_LOOP_DIFFERENCES = [
  'Raw loop vs library, remaining differences (same claim filter/sort/update/returnDocument, same completion):',
  '  - the library also looks for expired leases (findAndModify on status running, ≤ 1 per poll interval, 1 s)',
  '  - the library claims from one loop, up to 8 claims in flight (MAX_CLAIMS_IN_FLIGHT); the raw loop runs `concurrency` loops',
  '  - the raw loop has no lease timers, events, retries or Nest; its lock ids have the same shape (host:pid:rand#n)',
];

export interface ThroughputTrial {
  system: ThroughputSystem;
  /** Round of the interleaved sequence (1-based): ratios pair the systems of the same round. */
  round: number;
  jobs: number;
  /** Jobs completed inside the measured run (all but those finished while the enqueue was still running). */
  measuredJobs: number;
  /** Time to store all jobs (excluded from throughput). */
  enqueueMs: number;
  /** From "all enqueued" to "all completed". */
  runMs: number;
  jobsPerSecond: number;
  /** Jobs already completed when the enqueue returned (the worker was live during it); 0 for raw and Agenda. */
  completedDuringEnqueue: number;
  /** This process's CPU (user+system) per measured job during the run: the client-side cost. */
  clientCpuMsPerJob: number;
  /** The server process's CPU per measured job, when its pid is known (the Java server): the server-side cost. */
  serverCpuMsPerJob: number | null;
  /** Commands sent per job during the run, by kind: only in the counting trial (`countCommands`), else empty. */
  commandsPerJob: Record<string, number>;
}

/** One system over its rounds: median and range of each figure. */
export interface SystemSummary {
  rounds: number;
  jobsPerSecond: Spread;
  clientCpuMsPerJob: Spread;
  serverCpuMsPerJob: Spread;
  commandsPerJob: Spread;
  enqueueJobsPerSecond: number;
}

/** A system's figures relative to the raw loop's in the same rounds (throughput: higher is better; CPU: lower). */
export interface RatiosToRaw {
  jobsPerSecond: RatioSpread;
  clientCpuMsPerJob: RatioSpread;
  serverCpuMsPerJob: RatioSpread;
}

export interface ThroughputReport {
  config: {
    jobs: number;
    concurrency: number;
    rounds: number;
    agendaRounds: number;
    libraryPollIntervalMs: number;
    agenda: Record<string, number>;
  };
  trials: Array<ThroughputTrial | { system: ThroughputSystem; round: number; error: string }>;
  systems: Record<string, SystemSummary | string>;
  ratiosToRaw: Record<string, RatiosToRaw>;
  libraryToAgenda: RatioSpread | null;
  /** The library's client CPU per job over the batched raw loop's (`raw-batched`), when both ran. */
  libraryToFloor: RatioSpread | null;
  targets: TargetCheck[];
  table: string;
}

/** The smallest handler there is: what is measured is the library's own cost per job. */
@Injectable()
class NoopJobs {
  @JobHandler(JOB)
  noop(): void {}
}

/**
 * Interleaved rounds of `raw, library, (diagnostic variants)` in rotating order, then Agenda in the first rounds: the machine's noise
 * drifts over minutes, so each system's figures are compared with the raw loop's of the same round.
 */
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
  const rounds = config.throughputRounds;
  for (let round = 1; round <= rounds; round += 1) {
    for (const system of roundOrder(systems, round)) {
      if (system === 'agenda' && round > config.agendaRounds) continue;
      log(`throughput round ${round}/${rounds}: ${system}, ${config.throughputJobs} jobs`);
      const cpu = new CpuMeter(serverPid);
      try {
        const run =
          system === 'library' || system === 'library-single-claims'
            ? await libraryTrial(ctx, config, cpu, round, system, false)
            : system === 'agenda'
              ? await agendaTrial(ctx, config, cpu, agendaConfig, round, false)
              : await rawTrial(ctx, config, cpu, system, round, false);
        trials.push(run);
        log(
          `  ${fmtInt(run.jobsPerSecond)} jobs/s (run ${fmtInt(run.runMs)} ms, enqueue ${fmtInt(run.enqueueMs)} ms), ` +
            `client ${fmt(run.clientCpuMsPerJob, 3)} ms/job, server ${fmt(run.serverCpuMsPerJob ?? Number.NaN, 3)} ms/job`,
        );
      } catch (error) {
        const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
        log(`  ${system} failed: ${reason}`);
        trials.push({ system, round, error: reason });
        // A system that cannot run on this server will not run on the next round either.
        if (system === 'agenda') systems.splice(systems.indexOf(system), 1);
      }
    }
  }
  const counts = await countCommands(ctx, config, systems, agendaConfig);
  return summarize(trials, counts, config, agendaConfig);
}

/**
 * Commands per job, by kind, from one more trial of each system with command monitoring on. Not in the measured
 * rounds: monitoring copies every command and decodes every reply once more (about a tenth of the library's client
 * allocations in a profile), which costs more the more commands a system sends.
 */
async function countCommands(
  ctx: BenchContext,
  config: BenchConfig,
  systems: readonly ThroughputSystem[],
  agenda: { processEveryMs: number; lockLimit: number },
): Promise<Map<ThroughputSystem, Record<string, number>>> {
  const counts = new Map<ThroughputSystem, Record<string, number>>();
  const cpu = new CpuMeter(null);
  for (const system of systems) {
    log(`throughput commands per job: ${system}, ${config.throughputJobs} jobs, command monitoring on`);
    try {
      const run =
        system === 'library' || system === 'library-single-claims'
          ? await libraryTrial(ctx, config, cpu, 0, system, true)
          : system === 'agenda'
            ? await agendaTrial(ctx, config, cpu, agenda, 0, true)
            : await rawTrial(ctx, config, cpu, system, 0, true);
      counts.set(system, run.commandsPerJob);
    } catch (error) {
      log(`  ${system} failed: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
    }
  }
  return counts;
}

/**
 * The systems in the order of this round: rotated by one each round (Agenda, in the first rounds only, last), so that
 * no system always runs right after the same one (and inherits, say, the server's collection of its dropped database).
 */
function roundOrder(systems: readonly ThroughputSystem[], round: number): ThroughputSystem[] {
  const rotating = systems.filter((system) => system !== 'agenda');
  const shift = (round - 1) % Math.max(1, rotating.length);
  return [...rotating.slice(shift), ...rotating.slice(0, shift), ...systems.filter((system) => system === 'agenda')];
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
    if (system === 'library' || system === 'library-single-claims')
      await libraryTrial(ctx, small, cpu, 0, system, false);
    // Agenda's failure, if any, is reported by the measured trials.
    else if (system === 'agenda') await agendaTrial(ctx, small, cpu, agenda, 0, false).catch(() => undefined);
    else await rawTrial(ctx, small, cpu, system, 0, false);
  }
}

/** A target's figure: its median and the range it is judged against, as printed. */
interface Measured {
  median: number;
  range: Spread;
  text: string;
}

const ofRatio = (r: RatioSpread | null | undefined): Measured | undefined =>
  r ? { median: r.ofMedians, range: r.rounds, text: fmtRatio(r) } : undefined;

/** Issue 30's targets: batched claims and completions amortise round trips across jobs. */
const TARGETS: Array<{ label: string; bound: Bound; measure: (r: ThroughputReport) => Measured | undefined }> = [
  {
    label: 'commands per job ≤ 0.5 (library)',
    bound: { op: '≤', value: 0.5 },
    measure: (r) => {
      const library = r.systems.library;
      if (typeof library !== 'object') return undefined;
      return {
        median: library.commandsPerJob.median,
        range: library.commandsPerJob,
        text: fmtSpread(library.commandsPerJob, 2),
      };
    },
  },
  {
    label: 'client CPU per job ≤ 0.5× raw loop',
    bound: { op: '≤', value: 0.5 },
    measure: (r) => ofRatio(r.ratiosToRaw.library?.clientCpuMsPerJob),
  },
  {
    label: 'throughput ≥ 2× raw loop',
    bound: { op: '≥', value: 2 },
    measure: (r) => ofRatio(r.ratiosToRaw.library?.jobsPerSecond),
  },
  {
    label: 'server CPU per job ≤ 1.05× raw loop',
    bound: { op: '≤', value: 1.05 },
    measure: (r) => ofRatio(r.ratiosToRaw.library?.serverCpuMsPerJob),
  },
  { label: 'throughput ≥ 2× Agenda 6', bound: { op: '≥', value: 2 }, measure: (r) => ofRatio(r.libraryToAgenda) },
];

function summarize(
  trials: ThroughputReport['trials'],
  counts: Map<ThroughputSystem, Record<string, number>>,
  config: BenchConfig,
  agenda: Record<string, number>,
): ThroughputReport {
  const ok = (system: ThroughputSystem) =>
    trials.filter((t): t is ThroughputTrial => t.system === system && !('error' in t));
  const byRound = (system: ThroughputSystem, pick: (t: ThroughputTrial) => number | null) =>
    new Map(ok(system).map((t) => [t.round, pick(t)]));
  const report: ThroughputReport = {
    config: {
      jobs: config.throughputJobs,
      concurrency: config.throughputConcurrency,
      rounds: config.throughputRounds,
      agendaRounds: config.agendaRounds,
      libraryPollIntervalMs: LIBRARY_POLL_INTERVAL_MS,
      agenda,
    },
    trials,
    systems: {},
    ratiosToRaw: {},
    libraryToAgenda: null,
    libraryToFloor: null,
    targets: [],
    table: '',
  };
  const rows: string[][] = [];
  const ratioRows: string[][] = [];
  const breakdown: string[] = ['Commands per job (one more trial per system, with command monitoring on):'];
  const notes: string[] = [];
  for (const system of SYSTEMS) {
    const runs = ok(system);
    const failure = trials.find((t) => t.system === system && 'error' in t) as { error: string } | undefined;
    if (failure)
      notes.push(
        `${system} failed in ${trials.filter((t) => t.system === system && 'error' in t).length} round(s): ${failure.error}`,
      );
    if (runs.length === 0) {
      if (failure) {
        report.systems[system] = `not run: ${failure.error}`;
        rows.push([system, 'not run', '', '', '', '', '']);
      }
      continue;
    }
    const summary: SystemSummary = {
      rounds: runs.length,
      jobsPerSecond: spreadOf(runs.map((t) => t.jobsPerSecond)),
      clientCpuMsPerJob: spreadOf(runs.map((t) => t.clientCpuMsPerJob)),
      serverCpuMsPerJob: spreadOf(runs.map((t) => t.serverCpuMsPerJob)),
      commandsPerJob: spreadOf([Object.values(counts.get(system) ?? {}).reduce((a, b) => a + b, 0)]),
      enqueueJobsPerSecond: medianOf(runs, (t) => (t.jobs / t.enqueueMs) * 1000),
    };
    report.systems[system] = summary;
    rows.push([
      system,
      String(summary.rounds),
      fmtSpread(summary.jobsPerSecond, 0),
      fmtSpread(summary.clientCpuMsPerJob, 3),
      fmtSpread(summary.serverCpuMsPerJob, 3),
      fmt(summary.commandsPerJob.median, 2),
      fmtInt(summary.enqueueJobsPerSecond),
    ]);
    if (system !== 'raw' && ok('raw').length > 0) {
      const ratios: RatiosToRaw = {
        jobsPerSecond: ratioSpread(
          byRound(system, (t) => t.jobsPerSecond),
          byRound('raw', (t) => t.jobsPerSecond),
        ),
        clientCpuMsPerJob: ratioSpread(
          byRound(system, (t) => t.clientCpuMsPerJob),
          byRound('raw', (t) => t.clientCpuMsPerJob),
        ),
        serverCpuMsPerJob: ratioSpread(
          byRound(system, (t) => t.serverCpuMsPerJob),
          byRound('raw', (t) => t.serverCpuMsPerJob),
        ),
      };
      report.ratiosToRaw[system] = ratios;
      ratioRows.push([
        system,
        fmtRatio(ratios.jobsPerSecond),
        fmtRatio(ratios.clientCpuMsPerJob),
        fmtRatio(ratios.serverCpuMsPerJob),
      ]);
    }
    const kinds = Object.entries(counts.get(system) ?? {}).map(([kind, count]) => `${kind} ${fmt(count, 2)}`);
    breakdown.push(`  ${system}: ${kinds.join(', ')}`);
  }
  if (ok('library').length > 0 && ok('raw-batched').length > 0) {
    // What the library adds to its own protocol: the part of the client CPU its code can still cut.
    report.libraryToFloor = ratioSpread(
      byRound('library', (t) => t.clientCpuMsPerJob),
      byRound('raw-batched', (t) => t.clientCpuMsPerJob),
    );
    notes.push(
      `Library client CPU over the batched raw loop (its protocol with nothing around it, same round): ${fmtRatio(report.libraryToFloor)}`,
    );
  }
  if (ok('library').length > 0 && ok('agenda').length > 0) {
    report.libraryToAgenda = ratioSpread(
      byRound('library', (t) => t.jobsPerSecond),
      byRound('agenda', (t) => t.jobsPerSecond),
    );
  }
  report.targets = TARGETS.map(({ label, bound, measure }) => {
    const m = measure(report);
    return {
      target: label,
      measured: m ? m.text : '–',
      verdict: m ? judge(bound, m.median, m.range) : 'not measured',
    };
  });
  const history = config.throughputHistory > 0 ? `, each with ${config.throughputHistory} attempts in its history` : '';
  const sizes = `${config.throughputJobs} no-op jobs${history}, one process, concurrency ${config.throughputConcurrency}`;
  const tables = [
    formatTable(
      `1. Throughput: ${sizes}, ${config.throughputRounds} interleaved rounds (median (min–max) over rounds)`,
      ['system', 'rounds', 'jobs/s', 'client CPU ms/job', 'server CPU ms/job', 'cmds/job', 'enqueue jobs/s'],
      rows,
    ),
    formatTable(
      '1b. Ratios to the raw loop: ratio of medians (min–max of the per-round ratios, same round)',
      ['system', 'jobs/s', 'client CPU ms/job', 'server CPU ms/job'],
      ratioRows,
    ),
    formatTable(
      '1c. Throughput targets (a target inside the per-round spread is not met)',
      ['target', 'library: ratio of medians (per-round min–max)', 'verdict'],
      report.targets.map((t) => [t.target, t.measured, t.verdict]),
    ),
  ];
  report.table = [...tables, ...breakdown, ...RAW_LOOP_DIFFERENCES, ...notes].join('\n');
  return report;
}

/**
 * This library: a Nest app with MongooseModule + JobsModule.forRoot and a no-op @JobHandler. `library-single-claims`
 * is the same with `claimBatchSize: 1` (one `findOneAndUpdate` per claimed job; completions still go in bulks): what
 * batched claims save.
 */
async function libraryTrial(
  ctx: BenchContext,
  config: BenchConfig,
  cpu: CpuMeter,
  round: number,
  system: 'library' | 'library-single-claims',
  counting: boolean,
): Promise<ThroughputTrial> {
  const n = config.throughputJobs;
  const dbName = benchDbName('tp_lib');
  const app = await createBenchApp(
    ctx.uri,
    dbName,
    {
      concurrency: config.throughputConcurrency,
      pollIntervalMs: LIBRARY_POLL_INTERVAL_MS,
      ...(system === 'library-single-claims' ? { claimBatchSize: 1 } : {}),
      // Module options to try (BENCH_LIBRARY_OPTIONS='{"telemetry":false}'): what a setting costs per job.
      ...(JSON.parse(process.env.BENCH_LIBRARY_OPTIONS ?? '{}') as JobsModuleOptions),
    },
    [NoopJobs],
    { monitorCommands: counting },
  );
  try {
    const jobs = app.get(JobsService);
    const commands = counting
      ? new CommandCounter(app.get<Connection>(getConnectionToken()).getClient() as never)
      : undefined;
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
    // One bulk insert; the running worker is woken by it (and may start on the first rows on a real mongod). Rows with
    // a history are inserted as stored (an enqueue writes none); the worker's next poll finds them.
    if (config.throughputHistory === 0) await jobs.enqueueMany(items);
    else
      await ctx.client
        .db(dbName)
        .collection('jobs')
        .insertMany(items.map((item) => retriedJobDoc(JOB, item.payload, config.throughputHistory)) as never[]);
    const t1 = nowMs();
    const completedDuringEnqueue = completed;
    const profile = counting ? null : await startWindowProfile(`${system}-round${round}`);
    cpu.start();
    commands?.start();
    await withTimeout(allDone.promise, TRIAL_TIMEOUT_MS, 'library throughput');
    const t2 = nowMs();
    subscription.unsubscribe();
    const measured = n - completedDuringEnqueue;
    const cpuUsed = cpu.stop();
    await profile?.stop();
    return trial(system, round, n, t1 - t0, t2 - t1, completedDuringEnqueue, cpuUsed, commands?.stop(measured) ?? {});
  } finally {
    await app.close();
    await dropDatabase(ctx.client.db(dbName));
  }
}

/**
 * The floor: the same collection shape and indexes, and the library's two queries per job with nothing around
 * them: one findOneAndUpdate claim (the library's filter with its name filter, sort, update and returnDocument) and
 * one owner-fenced updateOne completion (the library's filter and update), `concurrency` loops at once. No leases,
 * events, Nest, or retries. See RAW_LOOP_DIFFERENCES for what still differs.
 */
async function rawTrial(
  ctx: BenchContext,
  config: BenchConfig,
  cpu: CpuMeter,
  system: ThroughputSystem,
  round: number,
  counting: boolean,
): Promise<ThroughputTrial> {
  const n = config.throughputJobs;
  const dbName = benchDbName('tp_raw');
  // Its own client, like the library's own mongoose connection: both start with a cold pool. The same driver copy as
  // the library's (mongoose bundles its own, a minor version apart from the top-level one), so the two loops differ
  // in what they do, not in which driver and BSON build does it.
  const client = (await mongo.MongoClient.connect(ctx.uri, { monitorCommands: counting })) as unknown as MongoClient;
  const commands = counting ? new CommandCounter(client) : undefined;
  const db = client.db(dbName);
  const collection = db.collection('jobs');
  // The library's lock id shape (`host:pid:random#n`): the same bytes in every claim, completion and row.
  const workerId = defaultWorkerId();
  const names = [JOB];
  try {
    await createJobIndexes(collection);
    const docs = Array.from({ length: n }, (_, i) => retriedJobDoc(JOB, { i }, config.throughputHistory));
    const t0 = nowMs();
    await collection.insertMany(docs as never[], { ordered: false });
    const t1 = nowMs();
    const profile = counting ? null : await startWindowProfile(`${system}-round${round}`);
    cpu.start();
    commands?.start();
    let completed = 0;
    let sequence = 0;
    const claim = async (): Promise<{ _id: ObjectId; lockId: string } | null> => {
      const at = new Date();
      sequence += 1;
      const lockId = `${workerId}#${sequence}`;
      const lockedUntil = new Date(at.getTime() + LEASE_MS);
      if (system.endsWith('+reclaim')) {
        // What the library's claimNext does first: look for a running row whose lease ran out (there is none).
        const lost = { at, error: 'Lease expired before the previous attempt finished', errorClass: 'LeaseExpired' };
        const reclaimed = await collection.findOneAndUpdate(
          { status: 'running', lockedUntil: { $lte: at }, name: { $in: names } },
          {
            $set: { lockedBy: lockId, lockedUntil, startedAt: at, updatedAt: at, lastError: lost.error },
            $inc: { attemptCount: 1, fencingToken: 1 },
            $push: { attempts: { $each: [lost], $slice: -MAX_ATTEMPT_HISTORY } },
          } as unknown as UpdateFilter<Document>,
          { sort: { lockedUntil: 1, _id: 1 }, returnDocument: 'after' },
        );
        if (reclaimed) return { _id: reclaimed._id, lockId };
      }
      // job-claim.store.ts `take('pending', …)`: dueFilter + scopeFilter, CLAIM_SORT, claimUpdate.
      const job = await collection.findOneAndUpdate(
        { status: 'pending', runAt: { $lte: at }, name: { $in: names } },
        {
          $set: { status: 'running', lockedBy: lockId, lockedUntil, startedAt: at, updatedAt: at },
          $inc: { fencingToken: 1 },
        },
        { sort: { priority: -1, runAt: 1, _id: 1 }, returnDocument: 'after' },
      );
      return job && { _id: job._id, lockId };
    };
    // job-outcome.store.ts `complete`: the owner fence, and RELEASED_FIELDS plus lastError unset.
    const complete = async (job: { _id: ObjectId; lockId: string }): Promise<void> => {
      const finishedAt = new Date();
      const result = await collection.updateOne(
        { _id: job._id, lockedBy: job.lockId, status: 'running' },
        {
          $set: { status: 'completed', finishedAt, updatedAt: finishedAt },
          $unset: { lockedBy: '', lockedUntil: '', dedupeScope: '', lastError: '' },
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
    /**
     * The library's batched protocol with nothing around it: one claimer takes up to every free slot in three commands
     * (due ids in claim order, one bulk taking each for its own lock id, one read of what was taken), completions
     * finishing in one event-loop turn go out as one bulk. The floor batching can reach with this driver. Plain `find` and
     * `update` commands as the library sends them (`raw-batched`), or the driver's `bulkWrite` and cursors
     * (`raw-batched-helpers`).
     */
    const commandsOnly = system === 'raw-batched';
    const batchedClaimer = async (): Promise<void> => {
      const slots = config.throughputConcurrency;
      let running = 0;
      let freed: () => void = () => undefined;
      let queued: { _id: ObjectId; lockId: string }[] = [];
      const flush = async (): Promise<void> => {
        const jobs = queued;
        queued = [];
        const finishedAt = new Date();
        const completion = (job: { _id: ObjectId; lockId: string }) => ({
          filter: { _id: job._id, lockedBy: job.lockId, status: 'running' },
          update: {
            $set: { status: 'completed', finishedBy: job.lockId, finishedAt, updatedAt: finishedAt },
            $unset: { lockedBy: '', lockedUntil: '', dedupeScope: '', lastError: '' },
          },
        });
        if (commandsOnly) {
          const reply = await db.command({
            update: collection.collectionName,
            updates: jobs.map((job) => {
              const { filter, update } = completion(job);
              return { q: filter, u: update };
            }),
            ordered: false,
          });
          completed += reply.n as number;
        } else {
          const result = await collection.bulkWrite(
            jobs.map((job) => ({ updateOne: completion(job) })),
            { ordered: false },
          );
          completed += result.matchedCount;
        }
        running -= jobs.length;
        freed();
      };
      for (;;) {
        if (running === slots) await new Promise<void>((resolve) => (freed = resolve));
        const at = new Date();
        const dueFilter = { status: 'pending', runAt: { $lte: at }, name: { $in: names } };
        const due = commandsOnly
          ? ((
              await db.command({
                find: collection.collectionName,
                filter: dueFilter,
                sort: { priority: -1, runAt: 1, _id: 1 },
                limit: slots - running,
                batchSize: slots - running,
                singleBatch: true,
                projection: { _id: 1, name: 1 },
              })
            ).cursor.firstBatch as { _id: ObjectId }[])
          : await collection
              .find(dueFilter, {
                sort: { priority: -1, runAt: 1, _id: 1 },
                limit: slots - running,
                batchSize: slots - running,
                projection: { _id: 1, name: 1 },
              })
              .toArray();
        if (due.length === 0) break;
        const lockedUntil = new Date(at.getTime() + LEASE_MS);
        const rows = due.map((row) => {
          sequence += 1;
          return { _id: row._id as ObjectId, lockId: `${workerId}#${sequence}` };
        });
        const take = (row: { _id: ObjectId; lockId: string }) => ({
          filter: { status: 'pending', runAt: { $lte: at }, name: { $in: names }, _id: row._id },
          update: {
            $set: { status: 'running', lockedBy: row.lockId, lockedUntil, startedAt: at, updatedAt: at },
            $inc: { fencingToken: 1 },
          },
        });
        const takenFilter = {
          _id: { $in: rows.map((row) => row._id) },
          status: 'running',
          lockedUntil,
          lockedBy: { $in: rows.map((row) => row.lockId) },
        };
        let taken: Document[];
        if (commandsOnly) {
          await db.command({
            update: collection.collectionName,
            updates: rows.map((row) => {
              const { filter, update } = take(row);
              return { q: filter, u: update };
            }),
            ordered: false,
          });
          taken = (
            await db.command({
              find: collection.collectionName,
              filter: takenFilter,
              sort: { priority: -1, runAt: 1, _id: 1 },
              projection: { attempts: 0 },
              batchSize: rows.length,
              singleBatch: true,
            })
          ).cursor.firstBatch as Document[];
        } else {
          await collection.bulkWrite(
            rows.map((row) => ({ updateOne: take(row) })),
            { ordered: false },
          );
          taken = await collection
            .find(takenFilter, {
              sort: { priority: -1, runAt: 1, _id: 1 },
              projection: { attempts: 0 },
              batchSize: rows.length,
            })
            .toArray();
        }
        running += taken.length;
        for (const row of taken) {
          void Promise.resolve().then(() => {
            queued.push({ _id: row._id as ObjectId, lockId: row.lockedBy as string });
            if (queued.length === 1) setTimeout(() => void flush(), 0);
          });
        }
      }
      while (running > 0) await new Promise<void>((resolve) => (freed = resolve));
    };
    const work: Promise<unknown> =
      system === 'raw-batched' || system === 'raw-batched-helpers'
        ? batchedClaimer()
        : system.startsWith('raw-serial-claim')
          ? serialClaimer()
          : Promise.all(Array.from({ length: config.throughputConcurrency }, loop));
    await withTimeout(work, TRIAL_TIMEOUT_MS, `${system} throughput`);
    const t2 = nowMs();
    if (completed !== n) throw new Error(`${system} completed ${completed} of ${n} jobs`);
    const cpuUsed = cpu.stop();
    await profile?.stop();
    return trial(system, round, n, t1 - t0, t2 - t1, 0, cpuUsed, commands?.stop(n) ?? {});
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
  round: number,
  counting: boolean,
): Promise<ThroughputTrial> {
  const n = config.throughputJobs;
  const [{ Agenda }, { MongoBackend }] = await Promise.all([
    import('agenda') as unknown as Promise<AgendaModule>,
    ensureAgendaBackend(),
  ]);
  const dbName = benchDbName('tp_agenda');
  const client = await MongoClient.connect(ctx.uri, { monitorCommands: counting });
  const commands = counting ? new CommandCounter(client) : undefined;
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
    commands?.start();
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
    const cpuUsed = cpu.stop();
    return trial('agenda', round, n, t1 - t0, t2 - t1, 0, cpuUsed, commands?.stop(n) ?? {});
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
  round: number,
  jobs: number,
  enqueueMs: number,
  runMs: number,
  completedDuringEnqueue: number,
  cpu: { clientMs: number; serverMs: number | null },
  commandsPerJob: Record<string, number>,
): ThroughputTrial {
  // Jobs the worker finished while the enqueue ran are outside the measured window, their CPU too.
  const measuredJobs = jobs - completedDuringEnqueue;
  return {
    system,
    round,
    jobs,
    measuredJobs,
    enqueueMs,
    runMs,
    jobsPerSecond: (measuredJobs / runMs) * 1000,
    completedDuringEnqueue,
    clientCpuMsPerJob: cpu.clientMs / measuredJobs,
    serverCpuMsPerJob: cpu.serverMs === null ? null : cpu.serverMs / measuredJobs,
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
