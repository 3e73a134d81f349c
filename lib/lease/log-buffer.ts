import { type JobLogLine, type LogBatch, MAX_LOG_LINES } from '../model/job-log.js';

/**
 * The lines one execution logged since its last write that carried some: constant-size (the row keeps only the last
 * MAX_LOG_LINES, so older ones are dropped here already, and counted).
 */
export class LogBuffer {
  private lines: JobLogLine[] = [];
  private count = 0;

  /** Lines waiting. */
  get size(): number {
    return this.lines.length;
  }

  add(line: JobLogLine): void {
    this.lines.push(line);
    this.count += 1;
    if (this.lines.length > MAX_LOG_LINES) this.lines.shift();
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
