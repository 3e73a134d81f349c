import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import type { ProxiedCommand } from '../support/fault-proxy';
import { createPrng } from './prng';
import { detectFeatures } from './torture-run';
import {
  type ArmedTrigger,
  callMatches,
  commandMatch,
  drawPlantedTrigger,
  drawTrigger,
  type TriggerPlan,
  triggerDone,
  triggerLabel,
  triggerSteps,
} from './triggers';

/** The state-keyed triggers on fake inputs: drawn from the seed alone, matched and used up as documented. */
describe('generative fault checker: state-keyed triggers', () => {
  const context = {
    proxied: 2,
    names: ['t.plain', 't.group'],
    grouped: ['t.group'],
    groups: ['g1', 'g2'],
    leaseMs: 1_500,
    codes: { transient: [91], document: [2], unlisted: [11601] },
  };
  const armed = (plan: TriggerPlan): ArmedTrigger => ({
    id: 1,
    plan,
    armedAt: 0,
    expiresAt: 3_000,
    used: 0,
    fired: false,
  });
  const command = (kind: ProxiedCommand['kind'], job?: string): ProxiedCommand => ({
    name: 'update',
    kind,
    connection: 1,
    ...(job && { job }),
  });

  it('one seed draws the same triggers, another seed others; both kinds and every action sequence are drawn', () => {
    const draw = (seed: number) => {
      const random = createPrng(seed);
      return Array.from({ length: 200 }, () => drawTrigger(random, context));
    };
    expect(draw(7)).toEqual(draw(7));
    expect(draw(7)).not.toEqual(draw(8));
    const labels = new Set(draw(7).map(triggerLabel));
    const sequences = ['cancel', 'cancel+purge-cancelled', 'cancel+retry', 'cancel+enqueue-sibling', 'outage+SIGTERM'];
    for (const sequence of sequences) {
      expect(labels).toContain(`call-start:${sequence}`);
    }
    expect([...labels].some((label) => label.startsWith('command:claim:'))).toBe(true);
    expect([...labels].some((label) => label.startsWith('command:renewal:'))).toBe(true);
    for (const plan of draw(7)) {
      if (plan.on === 'command') {
        expect(plan.slot).toBeGreaterThanOrEqual(0);
        expect(plan.slot).toBeLessThan(context.proxied);
        expect(plan.faults.length).toBeGreaterThanOrEqual(1);
        expect(plan.faults.length).toBeLessThanOrEqual(3);
      } else {
        expect(plan.afterMs).toBeLessThanOrEqual(context.leaseMs / 3);
        if (plan.name !== undefined) expect(context.names).toContain(plan.name);
      }
    }
  });

  it('the draws of unplanted triggers did not change (a seed keeps the plan it had before planted triggers)', () => {
    const random = createPrng(201 * 13 + 7);
    const labels = Array.from({ length: 8 }, () => triggerLabel(drawTrigger(random, context)));
    expect(labels).toEqual(UNPLANTED_LABELS_OF_SEED_201);
  });

  it('a planted trigger: drawn from the seed alone, its job keeps running past a lease, every sequence drawn', () => {
    const draw = (seed: number) => {
      const random = createPrng(seed);
      return Array.from({ length: 300 }, () => drawPlantedTrigger(random, context));
    };
    expect(draw(11)).toEqual(draw(11));
    expect(draw(11)).not.toEqual(draw(12));
    const labels = new Set(draw(11).map(triggerLabel));
    const sequences = [
      'cancel+enqueue-sibling',
      'outage+cancel+enqueue-sibling',
      'cancel+retry',
      'outage+cancel+retry',
      'cancel+purge-cancelled+enqueue-sibling',
      'outage+SIGTERM',
      'flap+SIGTERM',
      'SIGTERM+flap',
      'slow+SIGTERM',
      'SIGTERM+slow',
      'SIGKILL',
    ];
    for (const sequence of sequences) expect(labels).toContain(`planted:${sequence}`);
    const shapes = new Set<unknown>();
    for (const plan of draw(11)) {
      if (plan.on !== 'call-start' || !plan.plant) throw new Error('a planted trigger waits for a handler start');
      const { name, group, payload } = plan.plant;
      expect(plan.name).toBe(name);
      expect(context.names).toContain(name);
      // A grouped name's job carries a group, in the payload too (the handler reports it); another name's none.
      if (name === 't.group') expect(context.groups).toContain(group);
      else expect(group).toBeUndefined();
      expect(payload.group).toBe(group);
      shapes.add(payload.shape);
      expect(payload.ms).toBeGreaterThanOrEqual(context.leaseMs * 1.5);
      expect(payload.ms).toBeLessThanOrEqual(context.leaseMs * 2.5);
      expect(payload.ignore === true).toBe(payload.shape === 'ignoring');
      expect(payload.settleMs !== undefined).toBe(payload.shape === 'lateSettling');
      expect(plan.gapsMs).toHaveLength(plan.actions.length - 1);
      for (const gap of plan.gapsMs ?? []) expect(gap).toBeLessThanOrEqual(context.leaseMs);
      expect(plan.siblings).toBeGreaterThanOrEqual(1);
      expect(plan.siblings).toBeLessThanOrEqual(3);
      // A slow server: each data command answered one lease to 2.7 leases late, for 3 to 6 leases.
      expect(plan.slow?.delayMs).toBeGreaterThanOrEqual(context.leaseMs);
      expect(plan.slow?.delayMs).toBeLessThanOrEqual(context.leaseMs * 2.7);
      expect(plan.slow?.forMs).toBeGreaterThanOrEqual(context.leaseMs * 3);
      expect(plan.slow?.forMs).toBeLessThanOrEqual(context.leaseMs * 6);
      // A flapping outage: holes and gaps alternately, at least as long as the outage drawn.
      const flap = plan.flap ?? [];
      expect(flap.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(plan.outageMs);
      flap.forEach((ms, i) => {
        if (i % 2 === 0) expect(ms).toBeGreaterThanOrEqual(context.leaseMs * 0.6);
        else expect(ms).toBeLessThanOrEqual(context.leaseMs / 2);
      });
    }
    expect(shapes).toEqual(new Set(['ignoring', 'lateSettling', 'slow']));
  });

  it('a planted trigger fires only for the job it planted (marked with its id), in a worker', () => {
    const random = createPrng(5);
    const plan = drawPlantedTrigger(random, context);
    if (plan.on !== 'call-start') throw new Error('a planted trigger waits for a handler start');
    const call = { process: 'w0.1', job: 'j', name: plan.name as string, group: null, shape: plan.shape, plant: 9 };
    expect(callMatches(plan, call, 9)).toBe(true);
    expect(callMatches(plan, { ...call, plant: 8 }, 9)).toBe(false); // another trigger's job
    expect(callMatches(plan, { ...call, plant: undefined }, 9)).toBe(false); // a job nobody planted
    expect(callMatches(plan, call)).toBe(false); // no id to match
    expect(callMatches(plan, { ...call, process: 'driver' }, 9)).toBe(false);
    // An unplanted trigger ignores the mark: a planted job may fire it like any other.
    const { plant: _, ...unplanted } = plan;
    expect(callMatches(unplanted, call, 3)).toBe(true);
  });

  it("a fired trigger's steps: the runner's actions one by one, consecutive operations together, gaps between", () => {
    const base = { on: 'call-start' as const, afterMs: 0, sibling: { shape: 'quick' as const, ms: 1 }, outageMs: 1 };
    // An outage, the cancel 700 ms into it, the sibling right after the cancel (no gap between two operations).
    expect(triggerSteps({ ...base, actions: ['outage', 'cancel', 'enqueue-sibling'], gapsMs: [700, 900] })).toEqual([
      { gapMs: 0, own: 'outage' },
      { gapMs: 700, operations: ['cancel', 'enqueue-sibling'] },
    ]);
    expect(triggerSteps({ ...base, actions: ['SIGTERM', 'flap'], gapsMs: [450] })).toEqual([
      { gapMs: 0, own: 'SIGTERM' },
      { gapMs: 450, own: 'flap' },
    ]);
    // Unplanted triggers draw no gaps: their actions come at once, as before.
    expect(triggerSteps({ ...base, actions: ['outage', 'SIGTERM'] })).toEqual([
      { gapMs: 0, own: 'outage' },
      { gapMs: 0, own: 'SIGTERM' },
    ]);
    expect(triggerSteps({ ...base, actions: ['cancel', 'purge-cancelled', 'enqueue-sibling'] })).toEqual([
      { gapMs: 0, operations: ['cancel', 'purge-cancelled', 'enqueue-sibling'] },
    ]);
  });

  it('with no proxied worker, only handler-start triggers are drawn', () => {
    const random = createPrng(3);
    const plans = Array.from({ length: 50 }, () => drawTrigger(random, { ...context, proxied: 0 }));
    expect(plans.every((plan) => plan.on === 'call-start')).toBe(true);
  });

  it('a command trigger faults the next command of its kind on its slot, then only commands on the same row', () => {
    const trigger = armed({
      on: 'command',
      slot: 1,
      kind: 'renewal',
      faults: [
        { type: 'error-reply', code: 91, codeName: 'x' },
        { type: 'error-reply', code: 11601, codeName: 'y' },
      ],
    });
    expect(commandMatch(trigger, 0, command('renewal', 'a'))).toBeUndefined(); // another slot
    expect(commandMatch(trigger, 1, command('claim'))).toBeUndefined(); // another kind
    expect(commandMatch(trigger, 1, command('renewal', 'a'))).toMatchObject({ code: 91 });
    expect(trigger).toMatchObject({ used: 1, job: 'a', fired: true });
    expect(triggerDone(trigger)).toBe(false);
    expect(commandMatch(trigger, 1, command('renewal', 'b'))).toBeUndefined(); // another row
    expect(commandMatch(trigger, 1, command('renewal', 'a'))).toMatchObject({ code: 11601 });
    expect(triggerDone(trigger)).toBe(true);
    expect(commandMatch(trigger, 1, command('renewal', 'a'))).toBeUndefined(); // used up
  });

  it('a command trigger whose first command names no row takes the next commands of its kind', () => {
    const trigger = armed({
      on: 'command',
      slot: 0,
      kind: 'claim',
      faults: [{ type: 'lose-reply' }, { type: 'delay', ms: 1_600 }],
    });
    expect(commandMatch(trigger, 0, command('claim'))).toEqual({ type: 'lose-reply' });
    expect(commandMatch(trigger, 0, command('claim', 'any'))).toEqual({ type: 'delay', ms: 1_600 });
  });

  it('a handler-start trigger fires for a worker call of its name and shape, never for the driver', () => {
    const plan: TriggerPlan = {
      on: 'call-start',
      name: 't.group',
      shape: 'slow',
      afterMs: 0,
      actions: ['cancel', 'retry'],
      sibling: { shape: 'quick', ms: 5 },
      outageMs: 2_000,
    };
    const call = { process: 'w1.3', job: 'j', name: 't.group', group: 'g1', shape: 'slow' };
    expect(callMatches(plan, call)).toBe(true);
    expect(callMatches(plan, { ...call, process: 'driver' })).toBe(false);
    expect(callMatches(plan, { ...call, name: 't.plain' })).toBe(false);
    expect(callMatches(plan, { ...call, shape: 'quick' })).toBe(false);
    expect(callMatches({ ...plan, name: undefined, shape: undefined }, { ...call, name: 't.plain' })).toBe(true);
    const trigger = armed(plan);
    expect(triggerDone(trigger)).toBe(false);
    trigger.fired = true;
    expect(triggerDone(trigger)).toBe(true);
    expect(triggerLabel(plan)).toBe('call-start:cancel+retry');
  });
});

/** `--package` runs an older build: the workload draws only the features found in its text. */
describe('generative fault checker: the features of the build under test', () => {
  it('finds throttle, debounce and pause in a build that has them, and none in one that has not', () => {
    const old = mkdtempSync(join(tmpdir(), 'features-'));
    mkdirSync(join(old, 'enqueue'));
    writeFileSync(join(old, 'jobs.service.js'), 'class JobsService { async enqueue(name) {} async paused() {} }');
    writeFileSync(join(old, 'enqueue', 'options.js'), 'const KEYS = ["dedupeKey", "group"]; // throttled? no');
    expect(detectFeatures(old)).toEqual({ throttle: false, debounce: false, pause: false });
    writeFileSync(join(old, 'jobs.service.js'), 'class JobsService { async pause(name) {} async resume(name) {} }');
    writeFileSync(join(old, 'enqueue', 'options.js'), 'const KEYS = { throttle: true, debounce: true };');
    expect(detectFeatures(old)).toEqual({ throttle: true, debounce: true, pause: true });
  });

  it("finds all three in this repository's dist/", () => {
    expect(detectFeatures(resolve('dist'))).toEqual({ throttle: true, debounce: true, pause: true });
  });
});

/** The first unplanted triggers of long seed 201's first book, as drawn before planted triggers were added. */
const UNPLANTED_LABELS_OF_SEED_201 = [
  'command:claim:delay',
  'command:claim:error-reply',
  'command:outcome:lose-reply',
  'call-start:cancel+retry',
  'call-start:retry',
  'command:claim:delay+error-reply+error-reply',
  'command:claim:error-reply+delay',
  'command:renewal:error-reply',
];
