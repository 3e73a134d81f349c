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
  drawTrigger,
  type TriggerPlan,
  triggerDone,
  triggerLabel,
} from './triggers';

/** The state-keyed triggers on fake inputs: drawn from the seed alone, matched and used up as documented. */
describe('generative fault checker: state-keyed triggers', () => {
  const context = {
    proxied: 2,
    names: ['t.plain', 't.group'],
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
