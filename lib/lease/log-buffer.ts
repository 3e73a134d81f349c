import { type JobLogLine, type LogBatch, MAX_LOG_LINES } from '../model/job-log.js';

/** Lines waiting that make the lease ask for a renewal of their own, so a chatty handler's lines show while it runs. */
export const LOG_FLUSH_LINES = 50;

/**
 * The lines one execution logged since its last write that carried some: constant-size (the row keeps only the last
 * MAX_LOG_LINES, so older ones are dropped here already, and counted). Once kept for the outcome, renewals take none.
 */
export class LogBuffer {
  private lines: JobLogLine[] = [];
  private count = 0;
  private keptForOutcome = false;

  /** Lines waiting. */
  get size(): number {
    return this.lines.length;
  }

  add(line: JobLogLine): void {
    this.lines.push(line);
    this.count += 1;
    if (this.lines.length > MAX_LOG_LINES) this.lines.shift();
  }

  /** Whether enough lines wait for a write of their own (never once they are kept for the outcome). */
  get wantsWrite(): boolean {
    return !this.keptForOutcome && this.lines.length >= LOG_FLUSH_LINES;
  }

  /** From now on the outcome write carries every line: renewals take none. */
  keepForOutcome(): void {
    this.keptForOutcome = true;
  }

  /** What a renewal carries: everything waiting, unless the lines are kept for the outcome. */
  takeForRenewal(): LogBatch | undefined {
    return this.keptForOutcome ? undefined : this.take();
  }

  /** Everything waiting, for a write to carry; undefined when nothing was logged since the last take. */
  take(): LogBatch | undefined {
    if (this.count === 0) return undefined;
    const batch = { lines: this.lines, count: this.count };
    this.lines = [];
    this.count = 0;
    return batch;
  }

  /** A write that carried `batch` failed: its lines wait again, before those logged since. */
  putBack(batch: LogBatch): void {
    this.lines = [...batch.lines, ...this.lines].slice(-MAX_LOG_LINES);
    this.count += batch.count;
  }
}
