import { type BeforeApplicationShutdown, Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { type Observable, Subject } from 'rxjs';
import { now } from '../model/clock.js';
import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { IsolatedObservable } from '../model/events/isolated-observable.js';
import type { NamePauseEvent, PausedName } from '../model/events/name-pause-event.js';
import {
  JOBS_LOGGER_CONTEXT,
  JOBS_RESOLVED_OPTIONS,
  MAX_JOB_NAME_LENGTH,
  MAX_PAUSED_NAMES,
} from '../model/jobs.constants.js';
import type { ResolvedJobsOptions } from '../model/jobs.options.js';
import { nonEmptyString } from '../model/validate.js';
import { PausedNamesStore } from '../persistence/paused-names.store.js';

/**
 * The names paused fleet-wide, as this process knows them. The database is the truth (`PausedNamesStore`); a worker
 * reads it once per poll interval (`startWatching`), so a pause made anywhere is honoured by every worker of this
 * version within about one poll interval, and its claims (pending rows and expired leases alike) leave those names
 * out. Until its first read succeeded a worker claims nothing (`known`): a worker that boots during a pause must not
 * start a paused job.
 */
@Injectable()
export class PausedNames implements BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger(JOBS_LOGGER_CONTEXT);
  /** Name → since when; undefined until a read succeeded. */
  private current: Map<string, Date> | undefined;
  private readonly changes = new Subject<NamePauseEvent>();
  /** Paused and resumed names as this process learns them; subscriber errors are logged, never thrown back. */
  readonly changes$: Observable<NamePauseEvent> = new IsolatedObservable<NamePauseEvent>(
    (subscriber) => this.changes.subscribe(subscriber),
    (error) => this.logger.error(`A pauses$ subscriber threw: ${error instanceof Error ? error.message : error}`),
  );
  /** Counts reads sent and changes made here, in order: what a read's answer may overwrite. */
  private generation = 0;
  /** The generation of the newest read applied. */
  private appliedRead = 0;
  /** Names paused or resumed here, with the generation of that change, until a read sent after it is applied. */
  private readonly changesHere = new Map<string, { generation: number; pausedAt: Date | null }>();
  /** The last read found more than MAX_PAUSED_NAMES (warned once per streak). */
  private overfull = false;
  private timer: NodeJS.Timeout | undefined;
  private watching = false;
  /** A refresh failed and was logged: the next failures stay quiet until one succeeds. */
  private failing = false;

  constructor(
    private readonly store: PausedNamesStore,
    @Inject(JOBS_RESOLVED_OPTIONS) private readonly options: ResolvedJobsOptions,
  ) {}

  /** Whether a read of the paused names has succeeded here: before that, a worker must not claim. */
  get known(): boolean {
    return this.current !== undefined;
  }

  /** Whether `name` is paused as this process last read it (false before any read). */
  has(name: string): boolean {
    return this.current?.has(name) ?? false;
  }

  /** How many names are paused as this process last read them. */
  get size(): number {
    return this.current?.size ?? 0;
  }

  /** The paused names as last read here, sorted (empty before any read). */
  names(): string[] {
    return [...(this.current?.keys() ?? [])].sort();
  }

  /**
   * Pauses `name` fleet-wide (idempotent). Jobs of it already running finish; nothing claims it until `resume`.
   * @throws InvalidOptionError for a name that is not a non-empty string of at most MAX_JOB_NAME_LENGTH characters, or when
   * MAX_PAUSED_NAMES names are paused already
   */
  async pause(name: unknown): Promise<void> {
    const valid = nonEmptyString('name', name, MAX_JOB_NAME_LENGTH);
    const already = await this.store.isPaused(valid);
    if (!already && (await this.store.count()) >= MAX_PAUSED_NAMES) {
      throw new InvalidOptionError('name', valid, `at most ${MAX_PAUSED_NAMES} names can be paused at once`);
    }
    const at = now();
    await this.store.pause(valid, at);
    this.changedHere(valid, at);
    // A repeated pause is news only to a process that had not read it yet.
    if (!already || (this.current && !this.current.has(valid))) this.learn(valid, at);
  }

  /**
   * Resumes `name` fleet-wide; whether it was paused. Workers here claim it at once, others within a poll interval.
   * @throws InvalidOptionError for a name that is not a non-empty string of at most MAX_JOB_NAME_LENGTH characters
   */
  async resume(name: unknown): Promise<boolean> {
    const valid = nonEmptyString('name', name, MAX_JOB_NAME_LENGTH);
    const was = await this.store.resume(valid);
    this.changedHere(valid, null);
    if (was || this.has(valid)) this.forget(valid);
    return was;
  }

  /**
   * Reads the paused names from the database now (and learns any change); the fleet's truth, not this process's view.
   * Reads overlap (the timer, runNow, drain, metrics): an answer is applied only if no later read was, and never over
   * a pause or resume made here after it was sent, which it may not have seen.
   */
  async read(): Promise<PausedName[]> {
    const sentAt = ++this.generation;
    const rows = await this.store.findAll(MAX_PAUSED_NAMES + 1);
    if (rows.length > MAX_PAUSED_NAMES && !this.overfull) {
      this.logger.warn(
        `More than ${MAX_PAUSED_NAMES} names are paused (written around pause()): only the first ${MAX_PAUSED_NAMES} ` +
          'by name are honoured; resume some',
      );
    }
    this.overfull = rows.length > MAX_PAUSED_NAMES;
    const honoured = rows.slice(0, MAX_PAUSED_NAMES);
    if (sentAt > this.appliedRead) this.apply(new Map(honoured.map((row) => [row._id, row.pausedAt])), sentAt);
    return honoured.map((row) => ({ name: row._id, pausedAt: row.pausedAt }));
  }

  /** Takes a read sent at generation `sentAt` as the names known here, keeping this process's later changes. */
  private apply(read: Map<string, Date>, sentAt: number): void {
    for (const [name, change] of this.changesHere) {
      if (change.generation < sentAt)
        this.changesHere.delete(name); // the read saw it
      else if (change.pausedAt) read.set(name, change.pausedAt);
      else read.delete(name);
    }
    this.appliedRead = sentAt;
    const previous = this.current;
    this.current = read;
    if (!previous) return; // the first read is the starting state, not news
    for (const name of previous.keys()) if (!read.has(name)) this.emit('resumed', name);
    for (const name of read.keys()) if (!previous.has(name)) this.emit('paused', name);
  }

  /** A pause (since `pausedAt`) or resume (null) of `name` landed here: a read sent before now must not undo it. */
  private changedHere(name: string, pausedAt: Date | null): void {
    this.changesHere.set(name, { generation: ++this.generation, pausedAt });
  }

  /** In a worker: reads now, then every `pollIntervalMs`, until shutdown. A failed read keeps the last one known. */
  startWatching(): void {
    if (this.watching) return;
    this.watching = true;
    const tick = async () => {
      try {
        await this.read();
        if (this.failing) this.logger.log('Reading the paused names works again');
        this.failing = false;
      } catch (error) {
        if (!this.failing) {
          const message = error instanceof Error ? error.message : String(error);
          this.logger.warn(`Reading the paused names failed (the last names read still apply): ${message}`);
        }
        this.failing = true;
      }
      if (!this.watching) return;
      this.timer = setTimeout(tick, this.options.pollIntervalMs);
      this.timer.unref(); // the pauses alone must not keep the process alive
    };
    void tick();
  }

  /** A stopping worker claims nothing more: the reads stop with it. */
  beforeApplicationShutdown(): void {
    this.watching = false;
    clearTimeout(this.timer);
  }

  onApplicationShutdown(): void {
    this.beforeApplicationShutdown();
    this.changes.complete();
  }

  private learn(name: string, pausedAt: Date): void {
    if (this.current?.has(name)) return;
    this.current?.set(name, pausedAt);
    this.emit('paused', name);
  }

  private forget(name: string): void {
    if (this.current && !this.current.has(name)) return; // a read learnt it first
    this.current?.delete(name);
    this.emit('resumed', name);
  }

  private emit(type: NamePauseEvent['type'], name: string): void {
    this.changes.next({ type, name, at: now() });
  }
}
