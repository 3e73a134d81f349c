import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { PausedNames } from '../../../lib/claim/paused-names';
import { MAX_PAUSED_NAMES } from '../../../lib/model/jobs.constants';
import type { ResolvedJobsOptions } from '../../../lib/model/jobs.options';
import type { PausedNameDocument, PausedNamesStore } from '../../../lib/persistence/paused-names.store';

/**
 * A store whose rows the test sets, whose reads fail while `failing` is set, and whose next read answers only when
 * the test calls the `release` that `holdNextRead` returned (with the rows as they were when that read was sent).
 */
function controllableStore() {
  const state = { rows: [] as PausedNameDocument[], failing: undefined as Error | undefined, reads: 0 };
  let hold: Promise<void> | undefined;
  const store = {
    findAll: async () => {
      state.reads += 1;
      if (state.failing) throw state.failing;
      const seen = state.rows.map((row) => ({ ...row }));
      const gate = hold;
      hold = undefined;
      await gate;
      return seen;
    },
    isPaused: async (name: string) => state.rows.some((row) => row._id === name),
    count: async () => state.rows.length,
    pause: async (name: string, at: Date) => {
      if (!state.rows.some((row) => row._id === name)) state.rows.push({ _id: name, pausedAt: at });
    },
    resume: async (name: string) => {
      const before = state.rows.length;
      state.rows = state.rows.filter((row) => row._id !== name);
      return state.rows.length < before;
    },
  } as unknown as PausedNamesStore;
  const holdNextRead = () => {
    let release!: () => void;
    hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    return release;
  };
  return { state, store, holdNextRead };
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

  it('a read sent before a pause made here, answered after it, does not undo it (nor emit twice)', async () => {
    const { store, holdNextRead } = controllableStore();
    const paused = new PausedNames(store, options);
    const seen: string[] = [];
    paused.changes$.subscribe((event) => seen.push(`${event.type} ${event.name}`));
    await paused.read();
    const release = holdNextRead();
    const stale = paused.read(); // sent now: it sees no pause
    await paused.pause('mail');
    release();
    await stale;
    expect(paused.has('mail')).toBe(true);
    await paused.read(); // a read sent after the pause sees it, and is no news
    expect(paused.has('mail')).toBe(true);
    expect(seen).toEqual(['paused mail']);
  });

  it('a read sent before a resume made here, answered after it, does not pause the name again', async () => {
    const { store, holdNextRead } = controllableStore();
    const paused = new PausedNames(store, options);
    const seen: string[] = [];
    paused.changes$.subscribe((event) => seen.push(`${event.type} ${event.name}`));
    await paused.read();
    await paused.pause('mail');
    const release = holdNextRead();
    const stale = paused.read(); // sees the pause
    expect(await paused.resume('mail')).toBe(true);
    release();
    await stale;
    expect(paused.has('mail')).toBe(false);
    expect(seen).toEqual(['paused mail', 'resumed mail']);
  });

  it('drops the answer of a read when a later read was applied first', async () => {
    const { state, store, holdNextRead } = controllableStore();
    const paused = new PausedNames(store, options);
    await paused.read();
    const release = holdNextRead();
    const older = paused.read(); // sees nothing paused
    state.rows = [row('elsewhere')]; // paused by another process
    await paused.read();
    release();
    await older;
    expect(paused.has('elsewhere')).toBe(true);
  });

  it('honours at most MAX_PAUSED_NAMES names of a collection filled around pause()', async () => {
    const { state, store } = controllableStore();
    const paused = new PausedNames(store, options);
    state.rows = Array.from({ length: MAX_PAUSED_NAMES + 1 }, (_, i) => row(`n${String(i).padStart(4, '0')}`));
    expect(await paused.read()).toHaveLength(MAX_PAUSED_NAMES);
    expect(paused.size).toBe(MAX_PAUSED_NAMES);
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
