import type { HistoryLine, HistoryWriter } from './history';

/** How often the runner looks at its clock, and the gap between two looks that counts as a stall. */
const TICK_MS = 100;
const STALL_MS = 1_000;

/**
 * Records when the runner itself stopped running (`stall`: from, ms): a timer that fires every 100 ms and finds a
 * second or more since it last fired. The runner runs no library code, so a stall here is the machine's (a CPU or disk
 * freeze that also stops the workers), not a library's: the checker does not charge a worker's `close()` for the part
 * of a stall it overlapped (long seed 4707: every process, the runner included, stood still 7.5 s while a CI run beside
 * it installed packages).
 */
export class MachineStalls {
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly history: HistoryWriter) {}

  start(): void {
    let last = Date.now();
    this.timer = setInterval(() => {
      const now = Date.now();
      if (now - last >= STALL_MS) this.history.record({ type: 'stall', from: last, ms: now - last, t: now });
      last = now;
    }, TICK_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/** How much of `[from, to]` the runner's recorded stalls cover, in ms. */
export function stalledWithin(lines: readonly HistoryLine[], from: number, to: number): number {
  let covered = 0;
  for (const line of lines) {
    if (line.type !== 'stall' || line.p !== 'runner') continue;
    const start = Number(line.from);
    const end = start + Number(line.ms);
    covered += Math.max(0, Math.min(end, to) - Math.max(start, from));
  }
  return covered;
}
