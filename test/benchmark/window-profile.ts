import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';

/**
 * A V8 CPU profile of one trial's measured window only (BENCH_PROFILE_DIR=<dir>): unlike `node --cpu-prof`, it leaves
 * out module loading, app start-up and the enqueue, so `profile-summary` attributes the per-job cost alone. One file
 * per trial, named `<system>-round<n>.cpuprofile`; with BENCH_PROFILE_KIND=heap, a sampling heap profile of the bytes
 * allocated instead (`.heapprofile`, which Chrome DevTools opens), with `survivors` of those that outlived a minor GC,
 * with `retained` of those still alive at the window's end. Null when the variable is unset.
 */
export async function startWindowProfile(label: string): Promise<WindowProfile | null> {
  const dir = process.env.BENCH_PROFILE_DIR;
  if (!dir) return null;
  const kind = process.env.BENCH_PROFILE_KIND;
  const heap = kind === 'heap' || kind === 'survivors' || kind === 'retained';
  const session = new Session();
  session.connect();
  if (heap) {
    // Every allocation sampled about once per 4 KB, kept even when a GC has collected it: bytes allocated, by site.
    // `survivors`: only what no minor GC collected (lived past a scavenge: copied, promoted, then a major GC's work);
    // `retained`: only what is still alive when the window ends (what the window's jobs left behind, by site).
    await post(session, 'HeapProfiler.enable');
    await post(session, 'HeapProfiler.startSampling', {
      samplingInterval: 4096,
      includeObjectsCollectedByMajorGC: kind !== 'retained',
      includeObjectsCollectedByMinorGC: kind === 'heap',
    });
  } else {
    await post(session, 'Profiler.enable');
    // 100 µs: fine enough for a job that costs about as much.
    await post(session, 'Profiler.setSamplingInterval', { interval: 100 });
    await post(session, 'Profiler.start');
  }
  return {
    async stop() {
      const { profile } = (await post(session, heap ? 'HeapProfiler.stopSampling' : 'Profiler.stop')) as {
        profile: unknown;
      };
      session.disconnect();
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, `${label}.${heap ? 'heapprofile' : 'cpuprofile'}`), JSON.stringify(profile));
    },
  };
}

export interface WindowProfile {
  /** Ends the profile and writes it. */
  stop(): Promise<void>;
}

function post(session: Session, method: string, params?: object): Promise<unknown> {
  return new Promise((resolve, reject) =>
    session.post(method, params, (error, result) => (error ? reject(error) : resolve(result))),
  );
}
