import { readFileSync } from 'node:fs';

/** CPU time of this process and, on Linux with a known pid, of the server process, between `start` and `stop`. */
export class CpuMeter {
  private client = process.cpuUsage();
  private server: number | null = null;

  constructor(private readonly serverPid: number | null) {}

  start(): void {
    this.client = process.cpuUsage();
    this.server = readProcessCpuMs(this.serverPid);
  }

  /** Milliseconds of CPU (user + system) used since `start`; server null when its pid is unknown. */
  stop(): { clientMs: number; serverMs: number | null } {
    const used = process.cpuUsage(this.client);
    const serverNow = readProcessCpuMs(this.serverPid);
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
