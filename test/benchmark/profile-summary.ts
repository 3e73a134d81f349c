import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

/**
 * Summarizes a V8 .cpuprofile (from `node --cpu-prof`): top functions by self time, time by package, and the
 * inclusive time of this library's functions (lib/), which is where a fix would go.
 *
 *   node .cache/benchmark/test/benchmark/profile-summary.js <file.cpuprofile> [top=25]
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

function where(frame: CallFrame): string {
  if (!frame.url) return frame.functionName || '(native)';
  const path = frame.url.replace(/^file:\/\//, '');
  return `${relative(process.cwd(), path)}:${frame.lineNumber + 1}`;
}

/** Which package a frame belongs to: our lib, a node_modules package, node internals, or V8 pseudo-frames. */
function bucket(frame: CallFrame): string {
  const url = frame.url;
  if (!url) return frame.functionName.startsWith('(') ? frame.functionName : '(native)';
  if (url.startsWith('node:')) return 'node internals';
  // The innermost package: mongoose ships its own copy of the driver (node_modules/mongoose/node_modules/mongodb).
  const pkgs = [...url.matchAll(/node_modules\/((?:@[^/]+\/)?[^/]+)/g)].map((m) => m[1]);
  if (pkgs.length > 0) return pkgs.length > 1 ? `${pkgs.at(-1)} (in ${pkgs.at(-2)})` : pkgs[0];
  if (url.includes('/lib/')) return 'nestjs-mongo-jobs lib/';
  if (url.includes('/test/')) return 'benchmark/test code';
  return 'other';
}

function main(): void {
  const [file, topArg] = process.argv.slice(2);
  if (!file) throw new Error('usage: profile-summary <file.cpuprofile> [top]');
  const top = Number(topArg ?? 25);
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0);
  const idleUs = [...selfUs]
    .filter(([id]) => byId.get(id)?.callFrame.functionName === '(idle)')
    .reduce((a, [, us]) => a + us, 0);
  const busyUs = totalUs - idleUs;

  const selfByFn = new Map<string, number>();
  const selfByBucket = new Map<string, number>();
  // Inclusive time of lib/ functions: each sample counted once per distinct lib function on its stack.
  const inclusiveLib = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)?.callFrame;
    if (!frame) continue;
    const key = `${frame.functionName || '(anonymous)'}  ${where(frame)}`;
    selfByFn.set(key, (selfByFn.get(key) ?? 0) + us);
    selfByBucket.set(bucket(frame), (selfByBucket.get(bucket(frame)) ?? 0) + us);
    const seen = new Set<string>();
    for (let cursor: number | undefined = id; cursor !== undefined; cursor = parent.get(cursor)) {
      const f = byId.get(cursor)?.callFrame;
      if (f && bucket(f) === 'nestjs-mongo-jobs lib/') {
        const k = `${f.functionName || '(anonymous)'}  ${where(f)}`;
        if (!seen.has(k)) {
          seen.add(k);
          inclusiveLib.set(k, (inclusiveLib.get(k) ?? 0) + us);
        }
      }
    }
  }

  const pct = (us: number) => `${((us / busyUs) * 100).toFixed(1).padStart(5)}%`;
  const ms = (us: number) => `${(us / 1000).toFixed(0).padStart(7)} ms`;
  const print = (title: string, entries: Map<string, number>, n: number) => {
    console.log(`\n${title}`);
    for (const [key, us] of [...entries].sort((a, b) => b[1] - a[1]).slice(0, n)) {
      console.log(`${ms(us)} ${pct(us)}  ${key}`);
    }
  };
  console.log(
    `${file}: ${(totalUs / 1000).toFixed(0)} ms sampled, ${(busyUs / 1000).toFixed(0)} ms busy (percentages of busy)`,
  );
  print('Self time by package', selfByBucket, 20);
  print(`Top ${top} functions by self time`, selfByFn, top);
  print(`Top ${top} lib/ functions by inclusive time`, inclusiveLib, top);
}

main();
