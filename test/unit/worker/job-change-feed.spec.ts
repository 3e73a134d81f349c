import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import type { JobChange, JobChangesStore } from '../../../lib/persistence/job-changes.store';
import { type ChangeFeedListener, JobChangeFeed } from '../../../lib/worker/job-change-feed';

/** One scripted answer of a fake stream's `tryNext`: a change, nothing yet, or an error. */
type Step = JobChange | null | Error;

/** A store whose streams answer the scripted steps in order (one list per stream opened), then hang until closed. */
function fakeStore(streams: Step[][]) {
  const opened: unknown[] = [];
  const store = {
    watch: (_names: readonly string[], resumeAfter?: unknown) => {
      opened.push(resumeAfter);
      const steps = streams.shift() ?? [];
      let token: unknown = resumeAfter;
      let close: () => void = () => undefined;
      const closed = new Promise<void>((resolve) => {
        close = resolve;
      });
      return {
        get resumeToken() {
          return token;
        },
        tryNext: async () => {
          const step = steps.shift();
          if (step === undefined) {
            await closed;
            throw new Error('ChangeStream is closed');
          }
          if (step instanceof Error) throw step;
          if (step) token = step._id;
          return step;
        },
        close: async () => close(),
      };
    },
  };
  return { store: store as unknown as JobChangesStore, opened };
}

function serverError(code: number | undefined, name = 'MongoServerError'): Error {
  return Object.assign(new Error(`code ${code}`), { name, code });
}

function listener() {
  const calls: string[] = [];
  const l: ChangeFeedListener = {
    due: () => calls.push('due'),
    dueAt: (runAt) => calls.push(`dueAt:${runAt.getTime()}`),
    live: (live) => calls.push(`live:${live}`),
  };
  return { calls, l };
}

const until = async (check: () => boolean) => {
  for (let i = 0; i < 500 && !check(); i += 1) await new Promise((resolve) => setTimeout(resolve, 2));
  expect(check()).toBe(true);
};

describe('JobChangeFeed', () => {
  let feed: JobChangeFeed | undefined;
  afterEach(async () => {
    await feed?.stop();
    jest.restoreAllMocks();
  });

  it('gives up for good, logging once, when the server refuses the stream before it was ever live', async () => {
    const log = jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
    const { store, opened } = fakeStore([[serverError(undefined)]]);
    const { calls, l } = listener();
    feed = new JobChangeFeed(store);
    feed.start(['a'], l);
    await until(() => feed?.mode === 'unsupported');
    expect(opened).toHaveLength(1);
    expect(calls).toEqual([]);
    expect(log).toHaveBeenCalledTimes(1);
  });

  it('retries a transient error at boot (an election), then goes live', async () => {
    jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
    const { store, opened } = fakeStore([[serverError(10107)], [null]]);
    const { calls, l } = listener();
    feed = new JobChangeFeed(store);
    feed.start(['a'], l);
    await until(() => feed?.live === true);
    expect(opened).toEqual([undefined, undefined]);
    expect(calls).toEqual(['live:true', 'due']);
  });

  it('wakes for a change due now (after a jitter), sets a timer for a later one, and resumes from its token', async () => {
    jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
    const later = new Date(Date.now() + 60_000);
    const { store, opened } = fakeStore([
      [
        null,
        { _id: 't1', operationType: 'insert', runAt: new Date(0) },
        { _id: 't2', operationType: 'update', runAt: later },
        serverError(280),
      ],
      [null],
    ]);
    const { calls, l } = listener();
    feed = new JobChangeFeed(store);
    feed.start(['a'], l);
    await until(() => opened.length === 2 && feed?.live === true);
    await until(() => calls.filter((call) => call === 'due').length === 2);
    expect(opened).toEqual([undefined, 't2']);
    // One wake for t1 (its jitter may end on either side of the reopening), one for the reopened stream.
    expect(calls.filter((call) => call !== 'due')).toEqual([
      'live:true',
      `dueAt:${later.getTime()}`,
      'live:false',
      'live:true',
    ]);
  });

  it('reopens without its token when the oplog no longer holds it', async () => {
    jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
    const { store, opened } = fakeStore([
      [null, { _id: 't1', operationType: 'update', runAt: null }, serverError(286)],
      [null],
    ]);
    const { l } = listener();
    feed = new JobChangeFeed(store);
    feed.start(['a'], l);
    await until(() => opened.length === 2 && feed?.live === true);
    expect(opened).toEqual([undefined, undefined]);
  });
});
