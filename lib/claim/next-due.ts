import type { ClaimedJob } from '../model/claimed-job.js';
import { now } from '../model/clock.js';

/**
 * When this process's next pending job falls due, as far as it knows, so that an idle poll loop sleeps until then
 * rather than a whole poll interval, without reading it after every empty claim.
 *
 * The earliest `runAt` is read once when claims start coming back empty (`quiet`); while quiet, each poll reads it
 * instead of sending a claim that would find nothing, and claims only when it says a job is due: an idle worker sends
 * as many commands as before, and a delayed job starts at its `runAt`. Local enqueues and change-stream events make it
 * earlier without a read (`heard`); an arrival ends the quiet spell, so the next poll claims at once.
 */
export class NextDue {
  /** Epoch ms of the earliest pending `runAt` known; +Infinity: none was pending at the last read; undefined: unknown. */
  private at: number | undefined;
  /** The last claim found nothing due and nothing arrived since: a poll reads the next due time before claiming. */
  private idle = false;

  /** The earliest due time known (epoch ms), or undefined when unknown or nothing is pending. */
  get known(): number | undefined {
    return this.at === Number.POSITIVE_INFINITY ? undefined : this.at;
  }

  /** A job is known to be due by `at` (epoch ms): the next claim needs no read first. */
  private dueBy(at: number): boolean {
    return this.at !== undefined && this.at <= at;
  }

  /** What a read of the earliest pending `runAt` answered (null: nothing pending). */
  private read(runAt: Date | null): void {
    this.at = runAt === null ? Number.POSITIVE_INFINITY : runAt.getTime();
  }

  /** A pending job due at `at` (epoch ms) was stored or changed here or elsewhere: it counts without a read. */
  heard(at: number): void {
    if (this.at === undefined || at < this.at) this.at = at;
  }

  /** Work may be due now (a local enqueue, a resume, a change event): claim at once, no read first. */
  arrived(): void {
    this.idle = false;
    this.at = undefined;
  }

  /**
   * A claim of a due pending row: while quiet, and no job known due yet, one read of the earliest `runAt` instead of a
   * claim that would find nothing, and a claim only when it says one is due. The first empty claim after work reads it
   * once, so the loop knows how long it may sleep.
   */
  async take(claim: () => Promise<ClaimedJob | null>, readEarliest: () => Promise<Date | null>) {
    const wasQuiet = this.idle;
    if (wasQuiet && !this.dueBy(now().getTime())) {
      this.read(await readEarliest());
      if (!this.dueBy(now().getTime())) return null;
    }
    const taken = await claim();
    if (taken) {
      this.arrived(); // the quiet spell is over, and what falls due next is unknown
      return taken;
    }
    this.idle = true;
    // Quiet already: the job known due was taken by another worker; what comes next is unknown until a poll reads.
    if (wasQuiet) this.at = undefined;
    else this.read(await readEarliest());
    return null;
  }
}
