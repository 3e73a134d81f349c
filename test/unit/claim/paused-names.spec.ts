import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { PausedNames } from '../../../lib/claim/paused-names';
import type { ResolvedJobsOptions } from '../../../lib/model/jobs.options';
import type { PausedNameDocument, PausedNamesStore } from '../../../lib/persistence/paused-names.store';

/** A store whose rows the test sets, and whose reads fail while `failing` is set. */
function controllableStore() {
  const state = { rows: [] as PausedNameDocument[], failing: undefined as Error | undefined, reads: 0 };
  const store = {
    findAll: async () => {
      state.reads += 1;
      if (state.failing) throw state.failing;
      return state.rows.map((row) => ({ ...row }));
    },
  } as unknown as PausedNamesStore;
  return { state, store };
}

const row = (name: string): PausedNameDocument => ({ _id: name, pausedAt: new Date(0) });
const options = { pollIntervalMs: 1_000 } as ResolvedJobsOptions;

describe('PausedNames', () => {
  afterEach(() => {
    jest.useRealTimers();
  });

  it('is unknown until a read succeeded; the first read is the starting state, not news', async () => {
    const { state, store } = controllableStore();
    const paused = new PausedNames(store, options);
    const seen: string[] = [];
    paused.changes$.subscribe((event) => seen.push(`${event.type} ${event.name}`));
    expect(paused.known).toBe(false);
    state.rows = [row('a')];
    await paused.read();
    expect(paused.known).toBe(true);
    expect(paused.has('a')).toBe(true);
    expect(seen).toEqual([]);
  });

  it('emits what changed between two reads, once', async () => {
    const { state, store } = controllableStore();
    const paused = new PausedNames(store, options);
    const seen: string[] = [];
    paused.changes$.subscribe((event) => seen.push(`${event.type} ${event.name}`));
    state.rows = [row('a'), row('b')];
    await paused.read();
    state.rows = [row('b'), row('c')];
    await paused.read();
    await paused.read();
    expect(seen).toEqual(['resumed a', 'paused c']);
    expect(paused.names()).toEqual(['b', 'c']);
    expect(paused.size).toBe(2);
  });

  it('keeps the last names read while reads fail, and reads every poll interval until shutdown', async () => {
    jest.useFakeTimers();
    const { state, store } = controllableStore();
    const paused = new PausedNames(store, options);
    state.rows = [row('a')];
    paused.startWatching();
    await jest.advanceTimersByTimeAsync(0);
    expect(paused.has('a')).toBe(true);
    state.failing = new Error('connection refused');
    state.rows = [];
    await jest.advanceTimersByTimeAsync(3 * options.pollIntervalMs);
    expect(state.reads).toBe(4);
    expect(paused.has('a')).toBe(true); // an outage does not resume anything
    state.failing = undefined;
    await jest.advanceTimersByTimeAsync(options.pollIntervalMs);
    expect(paused.has('a')).toBe(false);
    paused.onApplicationShutdown();
    await jest.advanceTimersByTimeAsync(10 * options.pollIntervalMs);
    expect(state.reads).toBe(5);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('a subscriber that throws does not stop the reads or the other subscribers', async () => {
    const { state, store } = controllableStore();
    const paused = new PausedNames(store, options);
    const seen: string[] = [];
    paused.changes$.subscribe(() => {
      throw new Error('subscriber bug');
    });
    paused.changes$.subscribe((event) => seen.push(event.name));
    await paused.read();
    state.rows = [row('a')];
    await expect(paused.read()).resolves.toEqual([{ name: 'a', pausedAt: new Date(0) }]);
    expect(seen).toEqual(['a']);
  });
});
