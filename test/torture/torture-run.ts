import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type Collection, type Document, MongoClient } from 'mongodb';
import { ChaosWorker } from '../support/chaos-cluster';
import { COMMAND_KINDS } from '../support/command-kind';
import { type CommandFault, type FaultDecider, FaultProxy } from '../support/fault-proxy';
import { startTestMongoServer } from '../support/mongo-server';
import { serverErrorCodes } from '../support/server-error-codes';
import { checkRun, type RunSummary, type Violation } from './checker';
import { type HistoryLine, HistoryWriter, readHistory } from './history';
import { MachineStalls } from './machine-stalls';
import { createPrng, type Prng } from './prng';
import { GROUPS, ORPHAN_NAME, PROFILES, type TortureProfile, WORKLOAD_NAMES } from './profiles';
import { type RowSnapshot, RowWatcher } from './row-watcher';
import {
  type ArmedTrigger,
  type CallStarted,
  callMatches,
  commandMatch,
  drawPlantedTrigger,
  drawTrigger,
  triggerDone,
  triggerLabel,
  triggerSteps,
} from './triggers';

const PROCESS_SCRIPT = resolve('test/torture/torture-process.cjs');
const STOP_TIMEOUT_MS = 25_000;
const START_ATTEMPTS = 4;

export interface TortureOptions {
  seed: number;
  /** Length of the faulty phase. @default the profile's */
  seconds?: number;
  /** @default 'quick' */
  profile?: TortureProfile['name'];
  /** MongoDB server (no database name). @default MONGODB_URI, else a test server started for the run */
  uri?: string;
  /** The package the processes load instead of dist/ (a deliberately broken copy, to test the checker). */
  packagePath?: string;
  /** Where the history files go. @default a new directory under the OS temp dir */
  runDir?: string;
  /** Progress lines. @default none */
  log?: (line: string) => void;
  /**
   * Features of the build under test the workload may draw; a feature set to false is never drawn (an older library
   * without it, whose option errors are no violations). @default what `detectFeatures` finds in the package
   */
  features?: Partial<PackageFeatures>;
}

/** Features the workload draws that not every build of the library has. */
export interface PackageFeatures {
  /** `throttle` enqueue option. */
  throttle: boolean;
  /** `debounce` enqueue option. */
  debounce: boolean;
  /** `JobsService.pause` and `resume`. */
  pause: boolean;
}

/** The features a built package has, found in its JavaScript text (dist/ by default). */
export function detectFeatures(packageDir: string): PackageFeatures {
  const texts: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) {
        if (entry !== 'esm') walk(path);
      } else if (entry.endsWith('.js')) texts.push(readFileSync(path, 'utf8'));
    }
  };
  walk(packageDir);
  const any = (pattern: RegExp) => texts.some((text) => pattern.test(text));
  return { throttle: any(/\bthrottle\b/), debounce: any(/\bdebounce\b/), pause: any(/\basync pause\(/) };
}

export interface TortureReport {
  seed: number;
  profile: TortureProfile['name'];
  runDir: string;
  summary: RunSummary;
  violations: Violation[];
  /** Every history line of the run, in time order. */
  history: HistoryLine[];
}

/** One slot of the fleet: a worker process that may be killed and started again, behind a proxy or not. */
interface WorkerSlot {
  index: number;
  proxy?: FaultProxy;
  process?: ChaosWorker;
  generation: number;
  /** Being stopped or started: no other process fault may pick it meanwhile (it would start a second process). */
  busy: boolean;
  /** A slow server for this slot (a trigger's `slow`): until when, and how late each data command is answered. */
  slow?: { until: number; delayMs: number };
}

/**
 * One run of the generative fault checker: worker processes on one collection (some behind their own FaultProxy), a
 * driver process performing random operations, process and proxy faults drawn from `seed` for `seconds`; then faults
 * stop, every process is brought back, the run quiesces (bounded), the final rows are read, every process closes
 * gracefully, and the checker judges the history and the final rows.
 */
export async function runTorture(options: TortureOptions): Promise<TortureReport> {
  const profile = PROFILES[options.profile ?? 'quick'];
  const seconds = options.seconds ?? profile.seconds;
  const log = options.log ?? (() => undefined);
  const server = (options.uri ?? process.env.MONGODB_URI) ? undefined : await startTestMongoServer(log);
  const uri = options.uri ?? process.env.MONGODB_URI ?? (server?.uri as string);
  const runDir = options.runDir ?? mkdtempSync(join(tmpdir(), `torture-${options.seed}-`));
  mkdirSync(runDir, { recursive: true });
  const dbName = `torture_${options.seed}_${randomBytes(3).toString('hex')}`;
  const history = new HistoryWriter(join(runDir, 'runner.jsonl'), 'runner');
  const random = createPrng(options.seed);
  const direct = await MongoClient.connect(uri, { maxPoolSize: 4 });
  const jobs: Collection<Document> = direct.db(dbName).collection('jobs');
  const slots: WorkerSlot[] = [];
  let driver: ChaosWorker | undefined;
  const watcher = new RowWatcher(jobs, history);
  const stalls = new MachineStalls(history);
  stalls.start();
  const stopping = new Set<ChaosWorker>();
  const spawned = new Set<ChaosWorker>();
  const features = { ...detectFeatures(options.packagePath ?? resolve('dist')), ...options.features };
  // A few trigger books side by side, each arming one trigger at a time from its own generator; the planted ones
  // (which enqueue the job they wait for) first, so that a planted job's start fires its own trigger.
  const planted = Array.from(
    { length: profile.plantedAtOnce },
    () => new TriggerBook(history, (armed) => plant(armed)),
  );
  const books = [...planted, ...Array.from({ length: profile.triggersAtOnce }, () => new TriggerBook(history))];
  const armedNow = () => books.flatMap((book) => (book.current ? [book.current] : []));
  const restarts: Promise<void>[] = [];
  let faultsOn = false;

  const spawnProcess = (id: string, role: 'worker' | 'driver', jobsUri: string): ChaosWorker => {
    const child = spawn(process.execPath, ['--no-warnings=ExperimentalWarning', PROCESS_SCRIPT], {
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      env: {
        ...process.env,
        TORTURE_PROCESS_ID: id,
        TORTURE_ROLE: role,
        TORTURE_JOBS_URI: jobsUri,
        TORTURE_DB: dbName,
        TORTURE_NAMES: JSON.stringify(WORKLOAD_NAMES),
        TORTURE_JOBS_OPTIONS: JSON.stringify(profile.jobs),
        TORTURE_MONGOOSE_OPTIONS: JSON.stringify(profile.mongoose),
        TORTURE_HISTORY: join(runDir, `${id}.jsonl`),
        TORTURE_DRIVER: JSON.stringify({
          seed: options.seed,
          leaseMs: profile.jobs.leaseMs,
          names: [...WORKLOAD_NAMES, { name: ORPHAN_NAME, options: {} }].map(({ name, grouped }) => ({
            name,
            grouped,
          })),
          groups: GROUPS,
          opIntervalMs: profile.opIntervalMs,
          maxInFlight: profile.maxInFlight,
          weights: profile.weights,
          features,
        }),
        ...(options.packagePath && { TORTURE_PACKAGE: options.packagePath }),
      },
    });
    history.record({ type: 'spawn', process: id, role });
    const worker = new ChaosWorker(id, child, (line) => log(line));
    spawned.add(worker);
    child.on('message', (message: { type?: string } & Partial<CallStarted>) => {
      if (message?.type === 'call-start' && faultsOn) onCallStart({ ...(message as CallStarted), process: id });
    });
    void worker.exited.then(({ code, signal }) =>
      history.record({
        type: 'exit',
        process: id,
        code,
        signal,
        // A bootstrap that failed under faults (recorded as `startup-failed`) is retried by startSlot, not a crash.
        expected: worker.killedWith !== undefined || stopping.has(worker) || !worker.isReady,
      }),
    );
    return worker;
  };

  /** Starts the slot's next process; a bootstrap that fails under faults is tried again, a few times. */
  const startSlot = async (slot: WorkerSlot): Promise<void> => {
    for (let attempt = 1; ; attempt += 1) {
      slot.generation += 1;
      const id = `w${slot.index}.${slot.generation}`;
      slot.process = spawnProcess(id, 'worker', slot.proxy?.uri ?? uri);
      try {
        await slot.process.ready;
        history.record({ type: 'ready', process: id });
        return;
      } catch (error) {
        if (attempt >= START_ATTEMPTS) throw error;
      }
    }
  };

  /** Stops a slot's worker with `signal` (SIGTERM: a graceful shutdown), then starts it again `downMs` later. */
  const stopAndRestart = (slot: WorkerSlot, signal: 'SIGKILL' | 'SIGTERM', downMs: number): boolean => {
    const worker = slot.process;
    if (slot.busy || !worker?.isReady || !worker.alive) return false;
    slot.busy = true;
    history.record({ type: 'kill', process: worker.id, signal });
    worker.kill(signal);
    restarts.push(
      (async () => {
        await exitedWithin(worker, STOP_TIMEOUT_MS);
        worker.kill('SIGKILL');
        await worker.exited;
        await sleep(downMs);
        await startSlot(slot);
        slot.busy = false;
      })(),
    );
    return true;
  };

  /** A planted trigger was armed: the driver enqueues its job, marked with the trigger's id. */
  const plant = (armed: ArmedTrigger) => {
    const { plan } = armed;
    const job = plan.on === 'call-start' ? plan.plant : undefined;
    if (plan.on !== 'call-start' || !job || !faultsOn) return;
    driver?.child.send(
      {
        type: 'plant',
        id: armed.id,
        ...job,
        priority: plan.priority,
        payload: { ...job.payload, plant: armed.id },
      },
      () => undefined,
    );
  };

  /** A fired `call-start` trigger's steps (`triggerSteps`): the runner takes its own actions, the driver the others. */
  const takeActions = async (armed: ArmedTrigger, call: CallStarted, slot: WorkerSlot | undefined) => {
    const { plan } = armed;
    if (plan.on !== 'call-start') return;
    for (const step of triggerSteps(plan)) {
      if (step.gapMs > 0) await sleep(step.gapMs);
      if (!faultsOn) return;
      if ('operations' in step) {
        driver?.child.send(
          {
            type: 'trigger',
            id: armed.id,
            actions: step.operations,
            job: call.job,
            name: call.name,
            group: call.group,
            sibling: plan.sibling,
            siblings: plan.siblings ?? 1,
            priority: plan.priority,
          },
          () => undefined,
        );
        continue;
      }
      if (step.own === 'cut') slot?.proxy?.cutAll();
      if (step.own === 'outage') slot?.proxy?.blackhole(plan.outageMs);
      if (step.own === 'flap') void flap(slot?.proxy, plan.flap ?? []);
      if (step.own === 'slow' && slot?.proxy && plan.slow) {
        slot.slow = { until: Date.now() + plan.slow.forMs, delayMs: plan.slow.delayMs };
      }
      if ((step.own === 'SIGTERM' || step.own === 'SIGKILL') && slot?.process?.id === call.process) {
        stopAndRestart(slot, step.own, 300);
      }
    }
  };

  /** A flapping outage: black holes on and off, alternately, while faults are on. */
  const flap = async (proxy: FaultProxy | undefined, pulses: number[]) => {
    for (const [index, ms] of pulses.entries()) {
      if (!faultsOn || !proxy) return;
      if (index % 2 === 0) proxy.blackhole(ms);
      await sleep(ms);
    }
  };

  /** A handler started: a `call-start` trigger armed for it fires (after its pause). */
  const onCallStart = (call: CallStarted) => {
    const armed = armedNow().find((trigger) => !trigger.fired && callMatches(trigger.plan, call, trigger.id));
    if (armed?.plan.on !== 'call-start') return;
    armed.fired = true;
    const plan = armed.plan;
    history.record({
      type: 'trigger-fired',
      trigger: armed.id,
      label: triggerLabel(plan),
      job: call.job,
      process: call.process,
    });
    const slot = slots[Number(/^w(\d+)\./.exec(call.process)?.[1])];
    setTimeout(() => {
      if (faultsOn) void takeActions(armed, call, slot);
    }, plan.afterMs);
  };

  try {
    for (let index = 0; index < profile.workers; index += 1) {
      const proxy =
        index < profile.proxied
          ? await FaultProxy.start(uri, {
              label: `proxy${index}`,
              onFault: ({ at, ...fault }) => history.record({ type: 'fault', ...fault, t: at }),
              onFaultedReply: ({ at, ...reply }) => history.record({ type: 'fault-reply', ...reply, t: at }),
            })
          : undefined;
      slots.push({ index, proxy, generation: 0, busy: false });
    }
    // The first process creates the indexes alone: concurrent bootstraps would only race for them.
    await startSlot(slots[0]);
    await Promise.all(slots.slice(1).map(startSlot));
    driver = spawnProcess('driver', 'driver', uri);
    await driver.ready;
    watcher.start();
    history.record({ type: 'phase', phase: 'faults', seconds });
    log(`seed ${options.seed}: ${seconds} s of faults (${profile.name} profile), history in ${runDir}`);

    const codes = serverErrorCodes();
    for (const slot of slots) {
      const planned = commandFaults(createPrng(options.seed * 31 + slot.index + 1), profile, codes);
      // A `command` trigger armed for this slot's proxy comes first (and may stop the worker as its command passes).
      slot.proxy?.setDecider((command) => {
        let armed: ArmedTrigger | undefined;
        let keyed: ReturnType<typeof commandMatch>;
        for (const trigger of armedNow()) {
          keyed = commandMatch(trigger, slot.index, command);
          if (keyed) {
            armed = trigger;
            break;
          }
        }
        if (!armed || !keyed) {
          // A slow server: every command on a collection answered late (the monitor's heartbeats name none).
          const slow = slot.slow;
          if (slow && Date.now() < slow.until && command.collection !== undefined) {
            return { type: 'delay', ms: slow.delayMs };
          }
          return planned(command);
        }
        history.record({
          type: 'trigger-fired',
          trigger: armed.id,
          label: triggerLabel(armed.plan),
          job: command.job,
          proxy: `proxy${slot.index}`,
          kind: command.kind,
          fault: keyed.type,
        });
        if (armed.used === 1 && armed.plan.on === 'command') {
          // This command is forwarded; its reply, and everything else for a while, falls into the hole.
          if (armed.plan.outageMs) slot.proxy?.blackhole(armed.plan.outageMs);
          const signal = armed.plan.stop;
          if (signal) setImmediate(() => stopAndRestart(slot, signal, 300));
        }
        return keyed;
      });
    }
    faultsOn = true;
    const faultsUntil = Date.now() + seconds * 1_000;
    await Promise.all([
      processFaults(random, profile, slots, faultsUntil, stopAndRestart),
      proxyFaults(createPrng(options.seed * 17 + 5), profile, slots, faultsUntil),
      ...books.map((book, index) => {
        const context = {
          proxied: profile.proxied,
          names: WORKLOAD_NAMES.map(({ name }) => name),
          grouped: WORKLOAD_NAMES.filter(({ grouped }) => grouped).map(({ name }) => name),
          groups: GROUPS,
          leaseMs: profile.jobs.leaseMs as number,
          codes,
        };
        // The planted books draw from generators of their own: the other books' draws stay what they were.
        const plantedBook = index < planted.length;
        const seed = plantedBook
          ? options.seed * 19 + 11 + index * 1_000_003
          : options.seed * 13 + 7 + (index - planted.length) * 1_000_003;
        const pace = plantedBook
          ? { everyMs: profile.plantEveryMs, armedMs: profile.plantArmedMs, draw: drawPlantedTrigger }
          : { everyMs: profile.triggerEveryMs, armedMs: profile.triggerArmedMs, draw: drawTrigger };
        return armTriggers(createPrng(seed), pace, book, faultsUntil, context);
      }),
    ]);
    faultsOn = false;
    await Promise.all(restarts);

    history.record({ type: 'phase', phase: 'quiesce' });
    for (const slot of slots) slot.proxy?.setDecider(undefined);
    driver.child.send({ type: 'stop' });
    stopping.add(driver);
    await exitedWithin(driver, STOP_TIMEOUT_MS);
    driver.kill('SIGKILL');
    for (const slot of slots) if (!slot.process?.alive) await startSlot(slot);
    const settled = await quiesce(jobs, profile.quiesceStallMs, profile.quiesceMs);
    history.record({ type: 'phase', phase: 'final', settled });
    const finalRows = await jobs.find({}).toArray();
    // Kept with the history, so that the checker can judge the run again (`npm run torture -- --recheck <dir>`).
    writeFileSync(join(runDir, 'final-rows.json'), JSON.stringify(finalRows));
    await watcher.stop();
    history.record({ type: 'phase', phase: 'close' });
    await Promise.all(
      slots.map(async (slot) => {
        const worker = slot.process;
        if (!worker?.alive) return;
        stopping.add(worker);
        worker.child.kill('SIGTERM');
        await exitedWithin(worker, STOP_TIMEOUT_MS);
        worker.kill('SIGKILL');
      }),
    );
    history.record({ type: 'phase', phase: 'check' });
    const lines = readHistory(runDir);
    const { summary, violations } = checkRun(lines, finalRows as unknown as RowSnapshot[], {
      profile,
      seed: options.seed,
      orphanNames: [ORPHAN_NAME],
      names: WORKLOAD_NAMES,
    });
    return { seed: options.seed, profile: profile.name, runDir, summary, violations, history: lines };
  } finally {
    stalls.stop();
    await watcher.stop();
    for (const worker of spawned) worker.kill('SIGKILL');
    await Promise.all([...spawned].map((worker) => worker.exited));
    await Promise.all(slots.map((slot) => slot.proxy?.close()));
    await direct
      .db(dbName)
      .dropDatabase()
      .catch(() => undefined);
    await direct.close();
    history.close();
    await server?.stop();
  }
}

/** Judges a finished run again from its directory (history and final rows), e.g. after a change to the checker. */
export function recheck(runDir: string, seed: number, profileName: TortureProfile['name']): TortureReport {
  const lines = readHistory(runDir);
  const rows = JSON.parse(readFileSync(join(runDir, 'final-rows.json'), 'utf8')) as Record<string, unknown>[];
  for (const row of rows) {
    for (const field of ['lockedUntil', 'runAt', 'finishedAt'])
      if (row[field]) row[field] = new Date(row[field] as string);
  }
  const { summary, violations } = checkRun(lines, rows as unknown as RowSnapshot[], {
    profile: PROFILES[profileName],
    seed,
    orphanNames: [ORPHAN_NAME],
    names: WORKLOAD_NAMES,
  });
  return { seed, profile: profileName, runDir, summary, violations, history: lines };
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** Waits for `worker` to exit, at most `ms` (the timer is cleared, so nothing outlives the run). */
async function exitedWithin(worker: ChaosWorker, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([worker.exited, new Promise((done) => (timer = setTimeout(done, ms)))]);
  clearTimeout(timer);
}

/** A pause drawn around `mean` (0.5× to 1.5×). */
const around = (random: Prng, mean: number) => random.int(Math.floor(mean / 2), Math.floor((mean * 3) / 2));

/** Per-command faults of one proxy, drawn per command kind from its own generator. */
function commandFaults(
  random: Prng,
  profile: TortureProfile,
  codes: ReturnType<typeof serverErrorCodes>,
): FaultDecider {
  return (command) => {
    const rate = COMMAND_KINDS.includes(command.kind) ? (profile.commandFaultRates[command.kind] ?? 0) : 0;
    if (!random.chance(rate)) return undefined;
    const type = random.weighted({ delay: 4, 'lose-reply': 2, 'error-reply': 3 });
    if (type === 'delay') return { type, ms: random.int(50, profile.jobs.leaseMs as number) };
    if (type === 'lose-reply') return { type };
    const list = random.weighted({ transient: 2, document: 1, unlisted: 2 });
    const code = random.pick(codes[list]);
    return { type, code, codeName: `Injected${list}` } satisfies CommandFault;
  };
}

/** Until `until`: now and then one worker is SIGKILLed or stopped gracefully, then started again. */
async function processFaults(
  random: Prng,
  profile: TortureProfile,
  slots: WorkerSlot[],
  until: number,
  stopAndRestart: (slot: WorkerSlot, signal: 'SIGKILL' | 'SIGTERM', downMs: number) => boolean,
): Promise<void> {
  for (;;) {
    await sleep(around(random, profile.processFaultEveryMs));
    if (Date.now() >= until) break;
    const slot = random.pick(slots);
    const signal = random.chance(0.5) ? 'SIGKILL' : 'SIGTERM';
    const downMs = random.int(100, 1_500);
    stopAndRestart(slot, signal, downMs);
  }
}

/** The trigger armed now (one at a time), recorded as it is armed and as it expires unfired. */
class TriggerBook {
  private static nextId = 0;
  current: ArmedTrigger | undefined;

  /** `onArm` is told of each trigger as it is armed (a planted trigger's job is enqueued then). */
  constructor(
    private readonly history: HistoryWriter,
    private readonly onArm?: (armed: ArmedTrigger) => void,
  ) {}

  arm(plan: ArmedTrigger['plan'], forMs: number): ArmedTrigger {
    TriggerBook.nextId += 1;
    const id = TriggerBook.nextId;
    const now = Date.now();
    this.current = { id, plan, armedAt: now, expiresAt: now + forMs, used: 0, fired: false };
    this.history.record({ type: 'trigger-armed', trigger: id, label: triggerLabel(plan), plan });
    this.onArm?.(this.current);
    return this.current;
  }

  disarm(): void {
    const armed = this.current;
    if (armed && !armed.fired) this.history.record({ type: 'trigger-expired', trigger: armed.id });
    this.current = undefined;
  }
}

/**
 * Until `until`: state-keyed triggers (test/torture/triggers.ts), drawn from their own generator and armed one at a
 * time; each waits for its state (a command through a proxy, a handler start) up to `armedMs`, then, done or
 * expired, the next is armed after a pause around `everyMs`.
 */
async function armTriggers(
  random: Prng,
  pace: { everyMs: number; armedMs: number; draw: typeof drawTrigger },
  triggers: TriggerBook,
  until: number,
  context: Parameters<typeof drawTrigger>[1],
): Promise<void> {
  for (;;) {
    await sleep(around(random, pace.everyMs));
    if (Date.now() >= until) break;
    const armed = triggers.arm(pace.draw(random, context), pace.armedMs);
    while (Date.now() < Math.min(armed.expiresAt, until) && !triggerDone(armed)) await sleep(20);
    triggers.disarm();
  }
  triggers.disarm();
}

/** Until `until`: now and then one proxy cuts every connection, or black-holes all traffic for a while. */
async function proxyFaults(random: Prng, profile: TortureProfile, slots: WorkerSlot[], until: number): Promise<void> {
  const proxies = slots.flatMap((slot) => (slot.proxy ? [slot.proxy] : []));
  if (proxies.length === 0) return;
  for (;;) {
    await sleep(around(random, profile.proxyFaultEveryMs));
    if (Date.now() >= until) return;
    const proxy = random.pick(proxies);
    if (random.chance(0.5)) proxy.cutAll();
    else proxy.blackhole(random.int(200, 1_000));
  }
}

/**
 * Waits until no row is pending or running (except pending rows of names nobody handles). A backlog left by the
 * faulty phase may take a while to drain (one group's jobs run one at a time, and a failing one retries), so the
 * wait goes on while the open rows keep moving (a status, an owner or an attempt count changed); it ends, unsettled,
 * when nothing moved for `stallMs`, or at `boundMs` in all. True when every row settled.
 */
async function quiesce(jobs: Collection<Document>, stallMs: number, boundMs: number): Promise<boolean> {
  const deadline = Date.now() + boundMs;
  let before = '';
  let movedAt = Date.now();
  while (Date.now() < deadline && Date.now() - movedAt < stallMs) {
    const open = await jobs
      .find(
        { $or: [{ status: 'running' }, { status: 'pending', name: { $ne: ORPHAN_NAME } }] },
        { projection: { status: 1, lockedBy: 1, attemptCount: 1 }, sort: { _id: 1 } },
      )
      .toArray();
    if (open.length === 0) return true;
    const now = JSON.stringify(open);
    if (now !== before) movedAt = Date.now();
    before = now;
    await sleep(200);
  }
  return false;
}
