import { cpus, loadavg, totalmem } from 'node:os';
import { performance } from 'node:perf_hooks';

/** Milliseconds on the monotonic clock (sub-ms resolution). */
export const nowMs = (): number => performance.now();

/**
 * Milliseconds on a clock shared by processes of this machine: `timeOrigin` is the wall clock at process start,
 * so two processes agree to well under a millisecond (used for cross-process pickup latency).
 */
export const sharedClockMs = (): number => performance.timeOrigin + performance.now();

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got "${raw}"`);
  return Math.round(value);
}

/** Sizes for every scenario; BENCH_QUICK=1 shrinks them to a smoke run, each can be overridden by its own env var. */
export interface BenchConfig {
  quick: boolean;
  repetitions: number;
  throughputJobs: number;
  throughputConcurrency: number;
  /** Interleaved rounds of the throughput scenario (raw, library, … in each round). */
  throughputRounds: number;
  /**
   * Attempts already in each throughput job's history (BENCH_THROUGHPUT_HISTORY, default 0: fresh jobs), each with an
   * 8 KB stack: jobs that failed often, whose rows a claim need not read back whole.
   */
  throughputHistory: number;
  /** Rounds that also run Agenda (the first ones): it is the slowest, and only one target compares to it. */
  agendaRounds: number;
  renewal: RenewalConfig;
  enqueueJobs: number;
  pickupSamples: number;
  pickupPollIntervalMs: number;
  heartbeatCalls: number;
  heartbeatSpreadMs: number;
  depthSmall: number;
  depthLarge: number;
  depthClaims: number;
  /** Rows of the query scenario, and timed calls per query. */
  queryJobs: number;
  querySamples: number;
  /** Scenario names to run (BENCH_ONLY=throughput,heartbeat); all when unset. */
  only: string[] | null;
  /** Throughput systems to run (BENCH_THROUGHPUT_TARGETS=library,raw,…); library, raw and agenda when unset. */
  throughputTargets: string[] | null;
}

/** Sizes of the `renewals` scenario (see renewals.bench.ts). */
export interface RenewalConfig {
  repetitions: number;
  /** Worker concurrency, and the number of long jobs that fill it. */
  concurrency: number;
  leaseMs: number;
  /** Steady-state measuring window, once every slot is running and every lease has had a heartbeat interval. */
  windowMs: number;
  /** Short jobs for the throughput part, and how long each runs. */
  shortJobs: number;
  shortJobMs: number;
}

/**
 * `serverKind` picks the throughput default: the Java test server answers every query by scanning the whole
 * collection (no index use), so a 5,000-job run costs O(n²) there (~2 min per repetition of the three systems on
 * this machine); 2,000 keeps `npm run bench` near 5 minutes. A real mongod gets the full 5,000.
 */
export function readConfig(serverKind: string): BenchConfig {
  const quick = process.env.BENCH_QUICK === '1';
  const javaServer = serverKind === 'mongo-java-server';
  const list = (name: string): string[] | null => {
    const raw = process.env[name];
    return raw ? raw.split(',').map((s) => s.trim()) : null;
  };
  return {
    quick,
    repetitions: envInt('BENCH_REPS', 3),
    throughputJobs: envInt('BENCH_THROUGHPUT_JOBS', quick ? 500 : javaServer ? 2_000 : 5_000),
    throughputConcurrency: envInt('BENCH_CONCURRENCY', 16),
    throughputRounds: envInt('BENCH_THROUGHPUT_ROUNDS', quick ? 3 : 9),
    throughputHistory: envInt('BENCH_THROUGHPUT_HISTORY', 0),
    agendaRounds: envInt('BENCH_AGENDA_ROUNDS', quick ? 1 : 2),
    renewal: readRenewalConfig(quick),
    enqueueJobs: envInt('BENCH_ENQUEUE_JOBS', quick ? 200 : 1_000),
    pickupSamples: envInt('BENCH_PICKUP_SAMPLES', quick ? 30 : 200),
    pickupPollIntervalMs: envInt('BENCH_PICKUP_POLL_MS', 100),
    heartbeatCalls: envInt('BENCH_HEARTBEAT_CALLS', 10_000),
    heartbeatSpreadMs: envInt('BENCH_HEARTBEAT_SPREAD_MS', 1_000),
    depthSmall: envInt('BENCH_DEPTH_SMALL', 1_000),
    depthLarge: envInt('BENCH_DEPTH_LARGE', quick ? 5_000 : 50_000),
    depthClaims: envInt('BENCH_DEPTH_CLAIMS', quick ? 30 : 200),
    queryJobs: envInt('BENCH_QUERY_JOBS', quick ? 5_000 : 20_000),
    querySamples: envInt('BENCH_QUERY_SAMPLES', quick ? 10 : 40),
    only: list('BENCH_ONLY'),
    throughputTargets: list('BENCH_THROUGHPUT_TARGETS'),
  };
}

function readRenewalConfig(quick: boolean): RenewalConfig {
  const concurrency = envInt('BENCH_RENEWAL_CONCURRENCY', quick ? 100 : 500);
  return {
    repetitions: envInt('BENCH_RENEWAL_REPS', quick ? 1 : 2),
    concurrency,
    leaseMs: envInt('BENCH_RENEWAL_LEASE_MS', 3_000),
    windowMs: envInt('BENCH_RENEWAL_WINDOW_MS', quick ? 2_000 : 4_000),
    shortJobs: envInt('BENCH_RENEWAL_SHORT_JOBS', 2 * concurrency),
    shortJobMs: envInt('BENCH_RENEWAL_SHORT_JOB_MS', 2_000),
  };
}

export function median(values: number[]): number {
  return percentile(values, 50);
}

/** Linear interpolation between closest ranks; NaN for an empty list. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.ceil(rank);
  return sorted[low] + (sorted[high] - sorted[low]) * (rank - low);
}

export function mean(values: number[]): number {
  return values.length === 0 ? Number.NaN : values.reduce((sum, v) => sum + v, 0) / values.length;
}

/** Median of a numeric field over repetitions, ignoring repetitions where it is missing. */
export function medianOf<T>(reps: T[], pick: (rep: T) => number | undefined): number {
  return median(reps.map(pick).filter((v): v is number => typeof v === 'number' && Number.isFinite(v)));
}

export function fmt(value: number, digits = 1): string {
  if (!Number.isFinite(value)) return '–';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function fmtInt(value: number): string {
  return fmt(value, 0);
}

/** An aligned text table (console.table quotes strings and cannot right-align numbers). */
export function formatTable(title: string, headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  // Numbers right-aligned, text left-aligned: a cell is numeric if it starts like one.
  const cell = (text: string, i: number) =>
    /^[-+]?[\d.,–]+( ?[a-z%×/]*)?$|^[≤≥<>]/.test(text) ? text.padStart(widths[i]) : text.padEnd(widths[i]);
  const line = (cells: string[]) => `| ${cells.map(cell).join(' | ')} |`;
  const rule = `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`;
  return [`\n${title}`, line(headers), rule, ...rows.map(line)].join('\n');
}

export function machineInfo(): Record<string, unknown> {
  const cpuList = cpus();
  return {
    cpuModel: cpuList[0]?.model ?? 'unknown',
    cores: cpuList.length,
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    totalMemoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    // Other engineers share this 2-core machine: the load at start says how noisy the run may be.
    loadAverageAtStart: loadavg().map((v) => Math.round(v * 100) / 100),
  };
}

/** Calls `gc()` when node runs with --expose-gc (the bench script passes it). */
export function forceGc(): boolean {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) return false;
  gc();
  gc();
  return true;
}

export function log(line: string): void {
  process.stdout.write(`[bench] ${line}\n`);
}
