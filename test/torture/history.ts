import { closeSync, openSync, readdirSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/**
 * One line of a run's history. Every process appends to its own `<process>.jsonl` in the run directory; `t` is the
 * writer's clock (all processes share one machine, so one clock) and `p` the writer. Types:
 * - worker and driver processes (torture-process.cjs): `call-start`, `call-lease`, `call-abort`, `call-note`,
 *   `call-end`, `event`, `op`, `op-answer`, `close-start`, `close-end`, `close-hung`, `crash`, `startup-failed`,
 *   `log` (a warning or error the library logged);
 * - the runner: `spawn`, `ready`, `kill`, `exit`, `fault` (one injected by a proxy), `fault-reply` (what became of a
 *   delayed or lost reply, and which row it returned), `row` (a row's status or owner
 *   changed in the runner's snapshots), `row-gone` (a row vanished between two snapshots), `phase`, `stall` (the
 *   runner itself stood still for a second or more: the machine's freeze, see `machine-stalls.ts`).
 */
export interface HistoryLine {
  t: number;
  p: string;
  type: string;
  [field: string]: unknown;
}

/** An append-only JSON-lines file written synchronously: a line is on disk before the call returns. */
export class HistoryWriter {
  private readonly fd: number;

  constructor(
    path: string,
    private readonly processId: string,
  ) {
    this.fd = openSync(path, 'a');
  }

  record(line: Omit<HistoryLine, 't' | 'p'> & { t?: number }): void {
    writeSync(this.fd, `${JSON.stringify({ t: Date.now(), p: this.processId, ...line })}\n`);
  }

  close(): void {
    closeSync(this.fd);
  }
}

/** Every line of every history file in `dir`, in time order (a line cut short by a kill is skipped). */
export function readHistory(dir: string): HistoryLine[] {
  const lines: HistoryLine[] = [];
  for (const file of readdirSync(dir).filter((name) => name.endsWith('.jsonl'))) {
    for (const text of readFileSync(join(dir, file), 'utf8').split('\n')) {
      if (text.trim() === '') continue;
      try {
        lines.push(JSON.parse(text) as HistoryLine);
      } catch {
        // Only a write torn by SIGKILL can end mid-line; nothing after it was written by that process.
      }
    }
  }
  return lines.sort((a, b) => a.t - b.t);
}
