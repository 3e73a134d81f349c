import { readdirSync, readFileSync } from 'node:fs';

/** CPU time of this process and, on Linux with a known pid, of the server process, between `start` and `stop`. */
export class CpuMeter {
  private client = process.cpuUsage();
  private server: number | null = null;

  constructor(private readonly serverPid: number | null) {}

  private threads = new Map<string, number>();

  start(): void {
    if (process.env.BENCH_THREADS) this.threads = readThreadCpuMs();
    this.client = process.cpuUsage();
    this.server = readProcessCpuMs(this.serverPid);
  }

  /** Milliseconds of CPU (user + system) used since `start`; server null when its pid is unknown. */
  stop(): { clientMs: number; serverMs: number | null } {
    const used = process.cpuUsage(this.client);
    const serverNow = readProcessCpuMs(this.serverPid);
    if (process.env.BENCH_THREADS) printThreadCpu(this.threads, readThreadCpuMs());
    return {
      clientMs: (used.user + used.system) / 1000,
      serverMs: serverNow === null || this.server === null ? null : serverNow - this.server,
    };
  }
}

/** utime + stime from /proc/<pid>/stat, in ms (clock ticks are 100 Hz on Linux, so 10 ms resolution). */
function readProcessCpuMs(pid: number | null): number | null {
  if (pid === null) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}

/**
 * BENCH_THREADS=1: CPU of each of this process's threads between `start` and `stop`, grouped by thread name (the
 * main thread, V8's GC and compiler helpers, libuv's pool), printed to stderr. `process.cpuUsage` sums them all.
 */
function readThreadCpuMs(): Map<string, number> {
  const byThread = new Map<string, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      byThread.set(
        `${tid === String(process.pid) ? 'main' : name}:${tid}`,
        (Number(fields[11]) + Number(fields[12])) * 10,
      );
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return byThread;
}

function printThreadCpu(before: Map<string, number>, after: Map<string, number>): void {
  const byName = new Map<string, number>();
  for (const [key, ms] of after) {
    const name = key.slice(0, key.lastIndexOf(':'));
    byName.set(name, (byName.get(name) ?? 0) + ms - (before.get(key) ?? 0));
  }
  process.stderr.write(`threads: ${[...byName].map(([name, ms]) => `${name} ${ms}`).join(', ')}\n`);
}
