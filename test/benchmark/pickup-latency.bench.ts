import { type ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import { Injectable } from '@nestjs/common';
import { getConnectionToken } from '@nestjs/mongoose';
import type { Connection } from 'mongoose';
import { JobHandler, JobsService } from '../../lib';
import { type BenchContext, benchDbName, CommandCounter, createBenchApp, dropDatabase } from './bench-app';
import {
  type BenchConfig,
  fmt,
  formatTable,
  log,
  median,
  medianOf,
  nowMs,
  percentile,
  sharedClockMs,
  sleep,
  withTimeout,
} from './helpers';
import { PICKUP_JOB, type PickupParentMessage, type PickupWorkerMessage } from './pickup-worker';

const LOCAL_JOB = 'bench.pickup.local';
/** Poll interval of the in-process worker: long, so only the enqueue's wake-up can explain a short pickup. */
const LOCAL_POLL_MS = 1_000;
/** The delayed-job and idle scenarios run at the module's default poll interval: what an adopter gets. */
const DEFAULT_POLL_MS = 1_000;
/** How long an idle worker's commands are counted, per repetition. */
const IDLE_WINDOW_MS = 10_000;

export interface PickupRep {
  samplesMs: number[];
  p50Ms: number;
  p95Ms: number;
  maxMs: number;
}

/** Handler start times (monotonic clock) by sequence number, for the in-process worker. */
const localStarts = new Map<number, (at: number) => void>();

@Injectable()
class LocalPickupProbe {
  @JobHandler(LOCAL_JOB)
  started(payload: { seq: number }): void {
    const at = nowMs();
    localStarts.get(payload.seq)?.(at);
  }
}

/**
 * Enqueue → handler start, one job at a time with the worker idle.
 * (a) Same process: one app with the worker; its `enqueue` wakes the sleeping poll loop.
 * (b) Another process: a producer app (`worker: false`) here, the worker app in a forked Node process polling every
 *     `pickupPollIntervalMs`; nothing crosses the process boundary but the database, so pickup waits for a poll.
 */
export async function runPickupLatency(ctx: BenchContext, config: BenchConfig) {
  const local = await localPickup(ctx, config);
  const remote = await remotePickup(ctx, config);
  const delayed = await remotePickup(ctx, config, { pollMs: DEFAULT_POLL_MS, delayed: true });
  const idle = await idleCommands(ctx, config);
  const row = (label: string, reps: PickupRep[]) => {
    const pooled = reps.flatMap((r) => r.samplesMs);
    return [
      label,
      String(pooled.length),
      fmt(
        medianOf(reps, (r) => r.p50Ms),
        2,
      ),
      fmt(
        medianOf(reps, (r) => r.p95Ms),
        2,
      ),
      fmt(percentile(pooled, 50), 2),
      fmt(percentile(pooled, 95), 2),
      fmt(Math.max(...pooled), 2),
    ];
  };
  const table = formatTable(
    '3. Pickup latency, enqueue → handler start (ms)',
    ['worker', 'samples', 'p50 (median of reps)', 'p95 (median of reps)', 'p50 pooled', 'p95 pooled', 'max'],
    [
      row(`(a) same process, woken by enqueue (poll ${LOCAL_POLL_MS} ms)`, local.reps),
      row(`(b) other process, polling every ${config.pickupPollIntervalMs} ms`, remote.reps),
      row(`(c) other process, delayed job: handler start − runAt (poll ${DEFAULT_POLL_MS} ms)`, delayed.reps),
    ],
  );
  const kinds = [...new Set(local.commandsPerJob.flatMap((rep) => Object.keys(rep)))];
  const perJobTable = formatTable(
    '3a. A lone job in the same process: commands per job (enqueue, claim, outcome, going idle; median of reps)',
    ['command', 'per job'],
    kinds.map((kind) => [kind, fmt(median(local.commandsPerJob.map((rep) => rep[kind] ?? 0)), 2)]),
  );
  const idleTable = formatTable(
    `3b. Idle worker, commands per second (poll ${DEFAULT_POLL_MS} ms, ${IDLE_WINDOW_MS / 1000} s windows)`,
    ['command', 'per second (median of reps)', 'range'],
    Object.keys(idle.reps[0] ?? {}).map((kind) => {
      const values = idle.reps.map((rep) => rep[kind] ?? 0);
      return [kind, fmt(median(values), 2), `${fmt(Math.min(...values), 2)}–${fmt(Math.max(...values), 2)}`];
    }),
  );
  return { local, remote, delayed, idle, table: `${table}\n\n${perJobTable}\n\n${idleTable}` };
}

/**
 * Commands per second an idle worker sends (no job at all), by kind and in total: the cost of N idle workers is N
 * times this, forever.
 */
async function idleCommands(ctx: BenchContext, config: BenchConfig) {
  const dbName = benchDbName('pickup_idle');
  const app = await createBenchApp(ctx.uri, dbName, { pollIntervalMs: DEFAULT_POLL_MS }, [LocalPickupProbe], {
    monitorCommands: true,
  });
  const reps: Record<string, number>[] = [];
  try {
    const commands = new CommandCounter(app.get<Connection>(getConnectionToken()).getClient() as never);
    await sleep(2 * DEFAULT_POLL_MS); // past the boot's reads
    for (let rep = 1; rep <= config.repetitions; rep += 1) {
      log(`pickup rep ${rep}/${config.repetitions}: idle worker, ${IDLE_WINDOW_MS} ms`);
      commands.start();
      await sleep(IDLE_WINDOW_MS);
      const perSecond = commands.stop(IDLE_WINDOW_MS / 1000);
      perSecond.total = Object.values(perSecond).reduce((sum, n) => sum + n, 0);
      reps.push(perSecond);
    }
  } finally {
    await app.close();
    await dropDatabase(ctx.client.db(dbName));
  }
  return { pollIntervalMs: DEFAULT_POLL_MS, windowMs: IDLE_WINDOW_MS, reps };
}

async function localPickup(ctx: BenchContext, config: BenchConfig) {
  const dbName = benchDbName('pickup_local');
  const app = await createBenchApp(
    ctx.uri,
    dbName,
    { pollIntervalMs: LOCAL_POLL_MS, concurrency: 4 },
    [LocalPickupProbe],
    { monitorCommands: true },
  );
  const reps: PickupRep[] = [];
  /** Commands per job by kind, per repetition: a lone job's whole cost (enqueue, claim, outcome, going idle again). */
  const commandsPerJob: Record<string, number>[] = [];
  const commands = new CommandCounter(app.get<Connection>(getConnectionToken()).getClient() as never);
  try {
    const jobs = app.get(JobsService);
    let seq = 0;
    const sample = async (): Promise<number> => {
      seq += 1;
      const started = new Promise<number>((resolve) => localStarts.set(seq, resolve));
      const completed = nextEvent(jobs, 'completed');
      const t0 = nowMs();
      await jobs.enqueue(LOCAL_JOB, { seq });
      const at = await withTimeout(started, 10_000, `local pickup of job ${seq}`);
      localStarts.delete(seq);
      // Let the job finish and the loop go back to sleep, so the next enqueue finds an idle worker.
      await withTimeout(completed, 10_000, `completion of job ${seq}`);
      await sleep(5 + Math.random() * 10);
      return at - t0;
    };
    for (let i = 0; i < 10; i += 1) await sample(); // warm-up
    for (let rep = 1; rep <= config.repetitions; rep += 1) {
      log(`pickup rep ${rep}/${config.repetitions}: same process, ${config.pickupSamples} samples`);
      const samples: number[] = [];
      commands.start();
      for (let i = 0; i < config.pickupSamples; i += 1) samples.push(await sample());
      const perJob = commands.stop(config.pickupSamples);
      perJob.total = Object.values(perJob).reduce((sum, n) => sum + n, 0);
      commandsPerJob.push(perJob);
      reps.push(repOf(samples));
    }
  } finally {
    await app.close();
    await dropDatabase(ctx.client.db(dbName));
  }
  return { pollIntervalMs: LOCAL_POLL_MS, reps, commandsPerJob };
}

/**
 * Cross-process pickup. `delayed`: each job is enqueued with a `runAt` 0.5–1.5 poll intervals ahead, and the sample is
 * how late its handler starts after that `runAt` (fewer samples: each waits out its delay).
 */
async function remotePickup(
  ctx: BenchContext,
  config: BenchConfig,
  { pollMs = config.pickupPollIntervalMs, delayed = false } = {},
) {
  const dbName = benchDbName(delayed ? 'pickup_delayed' : 'pickup_remote');
  const poll = pollMs;
  const samplesPerRep = delayed ? Math.max(5, Math.round(config.pickupSamples / 10)) : config.pickupSamples;
  const producer = await createBenchApp(ctx.uri, dbName, { worker: false });
  const child = fork(join(__dirname, 'pickup-worker.js'), [], {
    env: { ...process.env, BENCH_URI: ctx.uri, BENCH_DB: dbName, BENCH_POLL_MS: String(poll) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const reps: PickupRep[] = [];
  let clockOffsetMs = 0;
  try {
    const inbox = new Inbox(child);
    await withTimeout(inbox.next('ready'), 60_000, 'pickup worker boot');
    clockOffsetMs = await measureClockOffset(child, inbox);
    const jobs = producer.get(JobsService);
    let seq = 0;
    const sample = async (): Promise<number> => {
      seq += 1;
      const started = inbox.next('started');
      const sentAt = sharedClockMs();
      // The delayed job's due time, on the machine-wide clock and as the Date the worker compares with.
      const dueAt = delayed ? sentAt + poll * (0.5 + Math.random()) : sentAt;
      const runAt = delayed ? { runAt: new Date(Date.now() + (dueAt - sentAt)) } : {};
      await jobs.enqueue(PICKUP_JOB, { seq }, { strict: false, ...runAt });
      const message = await withTimeout(started, 10_000 + poll * 3, `remote pickup of job ${seq}`);
      if (message.seq !== seq) throw new Error(`expected job ${seq} to start, got ${message.seq}`);
      // The worker re-polls right after a job finishes; a random gap spreads the next enqueue over its poll phase.
      await sleep(Math.random() * poll);
      return message.startedAt - clockOffsetMs - dueAt;
    };
    for (let i = 0; i < (delayed ? 2 : 5); i += 1) await sample(); // warm-up
    for (let rep = 1; rep <= config.repetitions; rep += 1) {
      log(
        `pickup rep ${rep}/${config.repetitions}: other process${delayed ? ', delayed' : ''}, ${samplesPerRep} samples`,
      );
      const samples: number[] = [];
      for (let i = 0; i < samplesPerRep; i += 1) samples.push(await sample());
      reps.push(repOf(samples));
    }
    child.send({ type: 'stop' } satisfies PickupParentMessage);
    await withTimeout(inbox.next('stopped'), 20_000, 'pickup worker shutdown').catch(() => child.kill());
  } finally {
    if (child.exitCode === null) child.kill();
    await producer.close();
    await dropDatabase(ctx.client.db(dbName));
  }
  return { pollIntervalMs: poll, mode: 'forked worker process', delayed, clockOffsetMs, reps };
}

/**
 * Child clock minus ours, from IPC round trips (NTP-style, the fastest round trips weigh most). Both clocks are
 * wall-clock-at-start plus a monotonic offset, so this is normally well under a millisecond; it is recorded anyway.
 */
async function measureClockOffset(child: ChildProcess, inbox: Inbox): Promise<number> {
  const probes: Array<{ rtt: number; offset: number }> = [];
  for (let i = 0; i < 30; i += 1) {
    const reply = inbox.next('clock');
    const t0 = sharedClockMs();
    child.send({ type: 'clock' } satisfies PickupParentMessage);
    const { at } = await withTimeout(reply, 5_000, 'clock probe');
    const t1 = sharedClockMs();
    probes.push({ rtt: t1 - t0, offset: at - (t0 + t1) / 2 });
  }
  probes.sort((a, b) => a.rtt - b.rtt);
  return median(probes.slice(0, 10).map((p) => p.offset));
}

/** Typed one-shot waits on the child's messages. */
class Inbox {
  private waiters: Array<{ type: string; resolve: (message: never) => void }> = [];

  constructor(child: ChildProcess) {
    child.on('message', (message: PickupWorkerMessage) => {
      const index = this.waiters.findIndex((w) => w.type === message.type);
      if (index >= 0) this.waiters.splice(index, 1)[0].resolve(message as never);
    });
  }

  next<T extends PickupWorkerMessage['type']>(type: T): Promise<Extract<PickupWorkerMessage, { type: T }>> {
    return new Promise((resolve) => this.waiters.push({ type, resolve }));
  }
}

function nextEvent(jobs: JobsService, type: string): Promise<void> {
  return new Promise((resolve) => {
    const subscription = jobs.events$.subscribe((event) => {
      if (event.type === type) {
        subscription.unsubscribe();
        resolve();
      }
    });
  });
}

function repOf(samplesMs: number[]): PickupRep {
  return {
    samplesMs,
    p50Ms: percentile(samplesMs, 50),
    p95Ms: percentile(samplesMs, 95),
    maxMs: Math.max(...samplesMs),
  };
}
