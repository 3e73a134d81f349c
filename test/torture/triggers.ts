import type { CommandKind } from '../support/command-kind';
import type { CommandFault, ProxiedCommand } from '../support/fault-proxy';
import type { Prng } from './prng';

/**
 * State-keyed triggers: schedules keyed to observed states, not to the clock. A seed fixes the plan of operations and
 * faults, not the interleaving, so a break that needs two things to meet within a lease (a cancel while a handler
 * runs, a shutdown while a claim is in flight) is rare and does not come back from its seed. A trigger is drawn from
 * the seed (its condition, its target and what it does), armed, and fires when the run shows the state it waits for:
 *
 * - `command`: the next command of a kind (claim, renewal, outcome write, read) through one worker's proxy gets the
 *   drawn faults, and the next ones on the same row (or, for a command that names no row, the next ones of that
 *   kind) get the rest (two renewals of one lease refused in a row, say); with `stop`, that worker is sent a
 *   signal at that moment, while the command is in flight; with `outageMs`, its proxy black-holes from then on;
 * - `call-start`: when a handler of a drawn name (and payload shape) starts, after a drawn pause, the drawn actions:
 *   cancel it, then maybe purge the cancelled rows, retry it (inside its cancel's settle window), enqueue a sibling of
 *   the same name and group; or retry or runNow it as it runs; or stop its worker, cut its worker's connections,
 *   or black-hole them for a while (an outage), maybe stopping the worker in it;
 * - `call-start` with a planted job: the trigger brings its state about instead of waiting for it. As it is armed,
 *   the driver enqueues a job of a drawn name (and group) whose handler keeps running (one that ignores its signal,
 *   one that takes long to wind down, a slow one), longer than a lease; its start fires the trigger, which then
 *   cancels it and enqueues one to three siblings of its name and group, due now (or retries it, or purges it),
 *   maybe in an outage of its worker (its renewals stall); or stops its worker in an outage, in a flapping one
 *   (black holes on and off), or while its server is slow (every command on a collection answered seconds late,
 *   the heartbeats on time); each action a drawn pause after the one before (none between two operations).
 *
 * Nothing here knows a bug: the kinds, targets and actions are drawn with fixed weights from the seed; the runner
 * draws every part of a trigger when it arms it, so the plan does not depend on timing.
 */
export type TriggerAction =
  | 'cancel'
  | 'purge-cancelled'
  | 'retry'
  | 'enqueue-sibling'
  | 'runNow'
  | 'SIGTERM'
  | 'SIGKILL'
  | 'cut'
  | 'outage'
  | 'flap'
  | 'slow';

/** The actions the runner takes itself (the others are operations the driver performs). */
export const RUNNER_ACTIONS: readonly TriggerAction[] = ['SIGTERM', 'SIGKILL', 'cut', 'outage', 'flap', 'slow'];

/** A job a trigger enqueues itself as it is armed, and whose start it waits for. */
export interface PlantedJob {
  name: string;
  group?: string;
  /** The handler's payload (see `work` in torture-process.cjs): shape, ms, ignore, settleMs, group. */
  payload: Record<string, unknown>;
}

export type TriggerPlan =
  | {
      on: 'command';
      /** The worker slot whose proxy watches for it. */
      slot: number;
      kind: Extract<CommandKind, 'claim' | 'renewal' | 'outcome' | 'read' | 'delete'>;
      /** One fault per matching command, in order. */
      faults: CommandFault[];
      /** A signal sent to that slot's worker as the first matching command passes (it is in flight). */
      stop?: 'SIGTERM' | 'SIGKILL';
      /** The proxy black-holes every connection for this long from the first matching command on (an outage). */
      outageMs?: number;
    }
  | {
      on: 'call-start';
      /** The handler's job name; any when absent. */
      name?: string;
      /** The payload's shape (quick, slow, failing, ignoring, lateSettling); any when absent. */
      shape?: string;
      /** Pause between the start and the first action. */
      afterMs: number;
      actions: TriggerAction[];
      /** The sibling's handler, for `enqueue-sibling`. */
      sibling: { shape: 'quick' | 'slow'; ms: number };
      /** How long the worker's proxy black-holes, for `outage`. */
      outageMs: number;
      /** The job the trigger plants (enqueued as it is armed); it fires on that job's start only. */
      plant?: PlantedJob;
      /** The priority of the planted job and its siblings (above the workload's: they jump its backlog). */
      priority?: number;
      /** How many siblings `enqueue-sibling` enqueues. @default 1 */
      siblings?: number;
      /** The pause before each action after the first (none between two of the driver's operations). @default none */
      gapsMs?: number[];
      /** For `flap`: black holes on and off, alternately (on, off, on…), in ms. */
      flap?: number[];
      /**
       * For `slow`: a slow server. For `forMs`, every command that names a collection (the jobs', the presence's) is
       * answered `delayMs` late; the driver's heartbeats (which name none) are answered on time, so it sees the server up.
       */
      slow?: { delayMs: number; forMs: number };
    };

/** What the draw needs to know of the run. */
export interface TriggerContext {
  /** Slots behind a fault proxy: 0 … proxied − 1. */
  proxied: number;
  names: readonly string[];
  leaseMs: number;
  /** Names whose jobs carry a group, and the groups (for planted jobs). */
  grouped?: readonly string[];
  groups?: readonly string[];
  codes: { transient: readonly number[]; document: readonly number[]; unlisted: readonly number[] };
}

const SHAPES = ['quick', 'slow', 'failing', 'ignoring', 'lateSettling'];

/** Sequences of actions a `call-start` trigger may take, with their weights. */
const ACTION_SEQUENCES: [TriggerAction[], number][] = [
  [['cancel'], 2],
  [['cancel', 'purge-cancelled'], 2],
  [['cancel', 'retry'], 2],
  [['cancel', 'enqueue-sibling'], 3],
  [['cancel', 'purge-cancelled', 'enqueue-sibling'], 2],
  [['retry'], 1],
  [['runNow'], 1],
  [['SIGTERM'], 1],
  [['SIGKILL'], 1],
  [['cut'], 1],
  [['outage'], 1],
  [['outage', 'SIGTERM'], 1],
];

/** Draws one trigger. Every random choice is made here, so one seed arms the same triggers in the same order. */
export function drawTrigger(random: Prng, context: TriggerContext): TriggerPlan {
  const lease = context.leaseMs;
  if (context.proxied > 0 && random.chance(0.5)) {
    const slot = random.int(0, context.proxied - 1);
    const kind = random.weighted({ claim: 4, renewal: 2, outcome: 2, read: 1, delete: 1 });
    const count = random.weighted({ one: 3, two: 2, three: 1 });
    const faults = Array.from({ length: count === 'one' ? 1 : count === 'two' ? 2 : 3 }, () =>
      drawFault(random, context),
    );
    const stop = random.chance(0.3) ? (random.chance(0.7) ? 'SIGTERM' : 'SIGKILL') : undefined;
    const outageMs = random.chance(0.2) ? random.int(lease / 2, lease * 4) : undefined;
    return { on: 'command', slot, kind, faults, ...(stop && { stop }), ...(outageMs && { outageMs }) };
  }
  const name = random.chance(0.8) ? random.pick(context.names) : undefined;
  const shape = random.chance(0.5) ? random.pick(SHAPES) : undefined;
  const afterMs = random.int(0, Math.floor(lease / 3));
  const actions = pickSequence(random, ACTION_SEQUENCES);
  const sibling = random.chance(0.7)
    ? { shape: 'quick' as const, ms: random.int(0, 60) }
    : { shape: 'slow' as const, ms: random.int(Math.floor(lease / 4), lease) };
  const outageMs = random.int(lease / 2, lease * 4);
  return {
    on: 'call-start',
    ...(name !== undefined && { name }),
    ...(shape !== undefined && { shape }),
    afterMs,
    actions,
    sibling,
    outageMs,
  };
}

/** The actions of a planted trigger, with their weights. */
const PLANTED_SEQUENCES: [TriggerAction[], number][] = [
  [['cancel', 'enqueue-sibling'], 3],
  [['outage', 'cancel', 'enqueue-sibling'], 3],
  [['cancel', 'retry'], 2],
  [['outage', 'cancel', 'retry'], 1],
  [['cancel', 'purge-cancelled', 'enqueue-sibling'], 1],
  [['outage', 'SIGTERM'], 1],
  [['flap', 'SIGTERM'], 1],
  [['SIGTERM', 'flap'], 1],
  [['slow', 'SIGTERM'], 2],
  [['SIGTERM', 'slow'], 1],
  [['SIGKILL'], 1],
];

/** Above the driver's priorities (−2 to 2): a planted job and its siblings are claimed before the backlog. */
const PLANTED_PRIORITY = 3;

/** What a planted job's handler does: it keeps running past a lease, whatever its signal says (or winds down late). */
const PLANTED_SHAPES = { ignoring: 4, lateSettling: 2, slow: 1 };

/**
 * Draws one planted trigger: the job it enqueues (name, group, a handler that keeps running past a lease) and what it
 * does once that job's handler started. Every random choice is made here, from the seed.
 */
export function drawPlantedTrigger(random: Prng, context: TriggerContext): TriggerPlan {
  const lease = context.leaseMs;
  const name = random.pick(context.names);
  const group = context.grouped?.includes(name) ? random.pick(context.groups ?? []) : undefined;
  const shape = random.weighted(PLANTED_SHAPES);
  const payload: Record<string, unknown> = {
    shape,
    ms: random.int(Math.floor(lease * 1.5), Math.floor(lease * 2.5)),
    ...(shape === 'ignoring' && { ignore: true }),
    ...(shape === 'lateSettling' && { settleMs: random.int(Math.floor(lease * 0.3), Math.floor(lease * 0.7)) }),
    ...(group !== undefined && { group }),
  };
  const actions = pickSequence(random, PLANTED_SEQUENCES);
  const gapsMs = actions.slice(1).map(() => random.int(0, lease));
  const siblings = random.int(1, 3);
  const sibling = random.chance(0.4)
    ? { shape: 'quick' as const, ms: random.int(0, 60) }
    : { shape: 'slow' as const, ms: random.int(Math.floor(lease / 2), Math.floor(lease * 1.6)) };
  const outageMs = random.int(lease * 2, lease * 5);
  const flap: number[] = [];
  for (let total = 0, on = true; total < outageMs; on = !on) {
    const ms = on ? random.int(Math.floor(lease * 0.6), Math.floor(lease * 2.4)) : random.int(lease / 6, lease / 2);
    flap.push(ms);
    total += ms;
  }
  const slow = { delayMs: random.int(lease, Math.floor(lease * 2.7)), forMs: random.int(lease * 3, lease * 6) };
  return {
    on: 'call-start',
    name,
    shape,
    afterMs: random.int(0, Math.floor(lease / 3)),
    actions,
    sibling,
    siblings,
    outageMs,
    gapsMs,
    flap,
    slow,
    priority: PLANTED_PRIORITY,
    plant: { name, ...(group !== undefined && { group }), payload },
  };
}

function pickSequence(random: Prng, sequences: [TriggerAction[], number][]): TriggerAction[] {
  const index = random.weighted(
    Object.fromEntries(sequences.map(([, weight], i) => [String(i), weight])) as Record<string, number>,
  );
  return sequences[Number(index)][0];
}

/** A fault for a keyed command: a reply held within the lease or past it, a reply lost, or an error reply. */
function drawFault(random: Prng, context: TriggerContext): CommandFault {
  const lease = context.leaseMs;
  const type = random.weighted({ shortDelay: 2, longDelay: 2, lose: 2, error: 2 });
  if (type === 'shortDelay') return { type: 'delay', ms: random.int(Math.floor(lease / 4), Math.floor(lease * 0.9)) };
  if (type === 'longDelay') return { type: 'delay', ms: random.int(lease, Math.floor(lease * 1.6)) };
  if (type === 'lose') return { type: 'lose-reply' };
  const list = random.weighted({ transient: 2, document: 1, unlisted: 2 });
  return { type: 'error-reply', code: random.pick(context.codes[list]), codeName: `Injected${list}` };
}

/** One handler start, as a worker reports it to the runner. */
export interface CallStarted {
  process: string;
  job: string;
  name: string;
  group: string | null;
  shape?: string;
  /** The id of the trigger that planted this job, if one did. */
  plant?: number;
}

/** A trigger armed until it fired or expired, and what it has done so far. */
export interface ArmedTrigger {
  id: number;
  plan: TriggerPlan;
  armedAt: number;
  expiresAt: number;
  /** Faults of a `command` trigger already given. */
  used: number;
  /** The row a `command` trigger pinned to at its first match, if the command named one. */
  job?: string;
  fired: boolean;
}

/** The fault a `command` trigger gives this command, or none; advances the trigger (`used`, `job`). */
export function commandMatch(armed: ArmedTrigger, slot: number, command: ProxiedCommand): CommandFault | undefined {
  const { plan } = armed;
  if (plan.on !== 'command' || plan.slot !== slot || plan.kind !== command.kind) return undefined;
  if (armed.used >= plan.faults.length) return undefined;
  if (armed.used > 0 && armed.job !== undefined && command.job !== armed.job) return undefined;
  if (armed.used === 0) armed.job = command.job;
  const fault = plan.faults[armed.used];
  armed.used += 1;
  armed.fired = true;
  return fault;
}

/**
 * Whether a `call-start` trigger fires for this handler start (only calls in worker processes: `w<slot>.<n>`); a
 * planted trigger (armed as `trigger`) fires only for the job it planted.
 */
export function callMatches(plan: TriggerPlan, call: CallStarted, trigger?: number): boolean {
  if (plan.on !== 'call-start') return false;
  if (!/^w\d+\./.test(call.process)) return false;
  if (plan.plant !== undefined && (trigger === undefined || call.plant !== trigger)) return false;
  if (plan.name !== undefined && plan.name !== call.name) return false;
  if (plan.shape !== undefined && plan.shape !== call.shape) return false;
  return true;
}

/** One step of a fired `call-start` trigger: after `gapMs`, one of the runner's own actions, or operations for the driver. */
export type TriggerStep = { gapMs: number } & ({ own: TriggerAction } | { operations: TriggerAction[] });

/**
 * The steps of a fired `call-start` trigger, in order: each of the runner's own actions is a step, consecutive
 * operations one step (the driver performs them one after the other); a step waits for the drawn gap before its first
 * action (none between two operations, none before the first action).
 */
export function triggerSteps(plan: Extract<TriggerPlan, { on: 'call-start' }>): TriggerStep[] {
  const steps: TriggerStep[] = [];
  for (const [index, action] of plan.actions.entries()) {
    const own = RUNNER_ACTIONS.includes(action);
    const last = steps.at(-1);
    if (!own && last && 'operations' in last) {
      last.operations.push(action);
      continue;
    }
    const gapMs = index > 0 ? (plan.gapsMs?.[index - 1] ?? 0) : 0;
    steps.push(own ? { gapMs, own: action } : { gapMs, operations: [action] });
  }
  return steps;
}

/** Whether a trigger is done: a `command` trigger once its faults are given, a `call-start` one once it fired. */
export function triggerDone(armed: ArmedTrigger): boolean {
  return armed.plan.on === 'command' ? armed.used >= armed.plan.faults.length : armed.fired;
}

/** A short label of a trigger for summaries: `command:claim:lose-reply+delay:SIGTERM`, `call-start:cancel+retry`. */
export function triggerLabel(plan: TriggerPlan): string {
  if (plan.on === 'command') {
    const extra = `${plan.stop ? `:${plan.stop}` : ''}${plan.outageMs ? ':outage' : ''}`;
    return `command:${plan.kind}:${plan.faults.map((fault) => fault.type).join('+')}${extra}`;
  }
  return `${plan.plant ? 'planted' : 'call-start'}:${plan.actions.join('+')}`;
}
