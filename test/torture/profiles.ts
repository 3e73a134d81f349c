import type { CommandKind } from '../support/command-kind';

/** A job name of the workload: its `@JobHandler` options, and whether its jobs carry a group. */
export interface WorkloadName {
  name: string;
  options: Record<string, unknown>;
  grouped?: boolean;
}

/** How hard one run pushes: processes, operations, faults and the bounds the checker allows. */
export interface TortureProfile {
  name: 'quick' | 'long';
  /** Worker processes; the first `proxied` of them reach the server through their own FaultProxy. */
  workers: number;
  proxied: number;
  /** Default length of the faulty phase, in seconds. */
  seconds: number;
  /** Longest wait for every job to reach a final state once faults stop (the "bounded quiesce"). */
  quiesceMs: number;
  /**
   * The quiesce also ends when no open row moved (status, owner, attempt count) for this long: more than a lease, a
   * heartbeat, the longest backoff, the longest handler and the longest enqueue delay together.
   */
  quiesceStallMs: number;
  /** Mean pause between two driver operations, and how many may be in flight at once. */
  opIntervalMs: number;
  maxInFlight: number;
  /** Mean pause between two process faults (SIGKILL or graceful stop of a worker, then a restart). */
  processFaultEveryMs: number;
  /** Mean pause between two proxy-wide faults (cut every connection, or black-hole a while). */
  proxyFaultEveryMs: number;
  /**
   * State-keyed triggers (test/torture/triggers.ts): mean pause between one trigger done (or expired) and the next
   * armed, and how long one waits for its state before it expires.
   */
  triggerEveryMs: number;
  triggerArmedMs: number;
  /** How many triggers may be armed at once (each from its own generator). */
  triggersAtOnce: number;
  /**
   * Planted triggers (which enqueue the job they wait for): how many books of them arm at once, the mean pause between
   * one done (or expired) and the next, and how long one waits for its job's start.
   */
  plantedAtOnce: number;
  plantEveryMs: number;
  plantArmedMs: number;
  /** Chance that one command of each kind is faulted. */
  commandFaultRates: Partial<Record<CommandKind, number>>;
  /** Options of every process's `JobsModule.forRoot`. */
  jobs: Record<string, unknown>;
  /** Driver options of every process's mongoose connection: fail fast, reconnect fast. */
  mongoose: Record<string, unknown>;
  /** Lateness allowed to a timer (lease deadlines, window bounds) on a loaded machine, in ms. */
  timerToleranceMs: number;
  /** Relative weights of the driver's operations. */
  weights: Record<string, number>;
}

const LEASE_MS = 1_500;

/** The names every process handles; `t.orphan` is enqueued too but handled by nobody (it must stay pending). */
export const WORKLOAD_NAMES: WorkloadName[] = [
  { name: 't.plain', options: { concurrency: 3 } },
  { name: 't.once', options: { maxAttempts: 1 } },
  { name: 't.global', options: { globalConcurrency: 2 } },
  { name: 't.group', options: { groupConcurrency: 1 }, grouped: true },
  { name: 't.rate', options: { rateLimit: { max: 4, perMs: 1_000 } } },
  { name: 't.retained', options: { retention: { completed: 300, cancelled: 300, dead: 500, failed: 500 } } },
];
export const ORPHAN_NAME = 't.orphan';
export const GROUPS = ['g1', 'g2', 'g3'];

const COMMON = {
  jobs: {
    leaseMs: LEASE_MS,
    heartbeatIntervalMs: 500,
    pollIntervalMs: 100,
    shutdownGraceMs: 300,
    concurrency: 4,
    maxAttempts: 4,
    backoff: { baseMs: 100, maxMs: 400 },
    retention: { completed: 2_000, cancelled: 1_000, dead: 3_000, failed: 3_000, sweepIntervalMs: 1_000 },
    telemetry: false,
  },
  mongoose: { serverSelectionTimeoutMS: 1_000, heartbeatFrequencyMS: 500, connectTimeoutMS: 1_000 },
  timerToleranceMs: 300,
  triggerEveryMs: 400,
  triggerArmedMs: 2_500,
  plantEveryMs: 1_000,
  plantArmedMs: 5_000,
  weights: { enqueue: 10, enqueueMany: 2, cancel: 2, retry: 2, runNow: 1, purge: 1, drain: 1, pause: 1, resume: 2 },
} as const;

export const PROFILES: Record<TortureProfile['name'], TortureProfile> = {
  quick: {
    name: 'quick',
    workers: 3,
    proxied: 2,
    seconds: 12,
    quiesceMs: 30_000,
    quiesceStallMs: 7_000,
    opIntervalMs: 100,
    maxInFlight: 4,
    triggersAtOnce: 2,
    plantedAtOnce: 1,
    processFaultEveryMs: 4_000,
    proxyFaultEveryMs: 3_000,
    commandFaultRates: { claim: 0.05, renewal: 0.05, outcome: 0.05, enqueue: 0.02, read: 0.02, delete: 0.05 },
    ...structuredClone(COMMON),
  },
  long: {
    name: 'long',
    workers: 4,
    proxied: 3,
    seconds: 60,
    quiesceMs: 90_000,
    quiesceStallMs: 7_000,
    opIntervalMs: 50,
    maxInFlight: 6,
    triggersAtOnce: 3,
    plantedAtOnce: 2,
    processFaultEveryMs: 5_000,
    proxyFaultEveryMs: 4_000,
    commandFaultRates: { claim: 0.04, renewal: 0.04, outcome: 0.04, enqueue: 0.02, read: 0.02, delete: 0.05 },
    ...structuredClone(COMMON),
  },
};
