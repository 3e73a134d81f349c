import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import type { mongo } from 'mongoose';
import { now } from '../model/clock.js';
import { errorInfo } from '../model/error-info.js';
import { JOBS_LOGGER_CONTEXT } from '../model/jobs.constants.js';
import { raceTimeout } from '../model/race-timeout.js';
import { type JobChange, JobChangesStore } from '../persistence/job-changes.store.js';
import { Wakeup } from './wakeup.js';

/** Longest random delay before an event wakes the poll loop: one insert must not wake every idle worker at once. */
export const CHANGE_WAKE_JITTER_MS = 20;
/** Waits before reopening a failed stream: doubling from the first, up to the last. */
const REOPEN_FIRST_MS = 100;
const REOPEN_MAX_MS = 10_000;
/** Shutdown waits this long at most for the stream to close (a `getMore` the server holds may answer late). */
const CLOSE_WAIT_MS = 1_000;

/**
 * Server errors a stream may recover from (the driver's resumable set: elections, shutdowns, stale routing): at boot
 * they are retried, not taken for a server without change streams. Any other server error before the stream was
 * ever live means no change streams here (a standalone answers 40573; other servers other codes, or none).
 */
const TRANSIENT_CODES = new Set([
  6, 7, 63, 89, 91, 133, 150, 189, 234, 262, 9001, 10107, 11600, 11602, 13388, 13435, 13436,
]);
/** The resume token is older than the oplog (ChangeStreamHistoryLost): reopen without it. */
const HISTORY_LOST = 286;

/**
 * Where the feed stands: `opening` (not answered yet), `live`, `reopening` (failed after it was live: the loop polls
 * at `pollIntervalMs` meanwhile), `unsupported` (the server refused it before it was ever live: polling only), `off`
 * (never started: no worker here, or stopped).
 */
export type ChangeFeedMode = 'opening' | 'live' | 'reopening' | 'unsupported' | 'off';

/** What the feed tells the poll loop. */
export interface ChangeFeedListener {
  /** A job may be claimable now (already delayed by a small random jitter). */
  due(): void;
  /** A pending job falls due at `runAt`, later than now. */
  dueAt(runAt: Date): void;
  /** The stream went live (true) or failed (false): the poll loop's interval follows. */
  live(live: boolean): void;
}

/**
 * One change stream per worker process on the jobs collection (`JobChangesStore`): an insert or update that can make
 * a job claimable wakes the idle poll loop, so a job enqueued by another process starts in milliseconds, and the poll
 * becomes a safety net. Support is found by trying: a server that refuses the stream before it ever ran (a standalone)
 * is logged once and the loop polls as before. A stream that fails later is reopened from its last resume token
 * (backing off), polling at the normal interval meanwhile, and the loop polls once when it is back.
 */
@Injectable()
export class JobChangeFeed implements OnApplicationShutdown {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);
  private stream?: mongo.ChangeStream<never, JobChange>;
  private running?: Promise<void>;
  private stopping = false;
  private state: ChangeFeedMode = 'off';
  /** The backoff before reopening a failed stream, cut short by `stop()`. */
  private readonly reopenWait = new Wakeup();
  private wakeTimer?: NodeJS.Timeout;

  constructor(private readonly store: JobChangesStore) {}

  /** Whether the stream is open and answering now. */
  get live(): boolean {
    return this.state === 'live' && !this.stopping;
  }

  get mode(): ChangeFeedMode {
    return this.state;
  }

  /** Opens the stream for `names` (once); it runs until `stop()`. */
  start(names: readonly string[], listener: ChangeFeedListener): void {
    if (this.running || this.stopping) return;
    this.state = 'opening';
    this.running = this.run(names, listener).finally(() => {
      if (this.state !== 'unsupported') this.state = 'off';
    });
  }

  /** Closes the stream; resolves once its loop ended. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.wakeTimer);
    this.reopenWait.wake();
    await this.stream?.close().catch(() => undefined);
    await this.running;
  }

  async onApplicationShutdown(): Promise<void> {
    await raceTimeout(this.stop(), CLOSE_WAIT_MS, () => undefined);
  }

  private async run(names: readonly string[], listener: ChangeFeedListener): Promise<void> {
    let token: unknown;
    let everLive = false;
    let failures = 0;
    while (!this.stopping) {
      const stream = this.store.watch(names, token) as mongo.ChangeStream<never, JobChange>;
      this.stream = stream;
      try {
        for (;;) {
          // The first call sends the aggregate; each later one a getMore the server holds until an event (or a while).
          const change = await stream.tryNext();
          if (this.stopping) return;
          if (this.state !== 'live') {
            this.state = 'live';
            listener.live(true);
            if (failures > 0) {
              this.logger.log('The jobs change stream is back');
              listener.due(); // events may have been missed while it was down, if its token was lost
            }
            everLive = true;
            failures = 0;
          }
          token = stream.resumeToken ?? token;
          if (change) this.deliver(change, listener);
        }
      } catch (error) {
        if (this.stopping) return;
        if (this.state === 'live') {
          this.state = 'reopening';
          listener.live(false);
        }
        const { message } = errorInfo(error);
        if (!everLive && !transient(error)) {
          this.state = 'unsupported';
          this.logger.log(
            `No change streams on this server (${message}): the worker polls every pollIntervalMs, and wakes at once ` +
              'only for jobs enqueued in this process',
          );
          return;
        }
        if (failures === 0) {
          this.logger.warn(
            `The jobs change stream failed (${message}): polling every pollIntervalMs until it is reopened from its ` +
              'last resume token',
          );
        }
        if (codeOf(error) === HISTORY_LOST) token = undefined;
        if (everLive) this.state = 'reopening';
        failures += 1;
        await this.reopenWait.sleep(Math.min(REOPEN_MAX_MS, REOPEN_FIRST_MS * 2 ** (failures - 1)));
      } finally {
        await stream.close().catch(() => undefined);
      }
    }
  }

  /** A pending job due now wakes the loop after a jitter (several at once: one wake); a later one sets its timer. */
  private deliver(change: JobChange, listener: ChangeFeedListener): void {
    const runAt = change.runAt instanceof Date ? change.runAt : null;
    if (runAt && runAt.getTime() > now().getTime()) {
      listener.dueAt(runAt);
      return;
    }
    if (this.wakeTimer) return;
    this.wakeTimer = setTimeout(() => {
      this.wakeTimer = undefined;
      listener.due();
    }, Math.random() * CHANGE_WAKE_JITTER_MS);
  }
}

function codeOf(error: unknown): unknown {
  return typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
}

/** A network error, or a server error the driver would resume a stream after. */
function transient(error: unknown): boolean {
  if (error instanceof Error && /Network|ServerSelection|PoolCleared/.test(error.name)) return true;
  const code = codeOf(error);
  return typeof code === 'number' && TRANSIENT_CODES.has(code);
}
