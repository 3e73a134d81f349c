import { startTestMongoServer } from '../support/mongo-server';
import { type Breakage, brokenBuild } from './broken-build';
import { formatViolation } from './checker';
import { PROFILES, type TortureProfile } from './profiles';
import { type PackageFeatures, recheck, runTorture, type TortureReport } from './torture-run';

/**
 * `npm run torture -- --seed S [--seconds N] [--profile quick|long] [--seeds K] [--minutes M] [--broken B] [--repeat R]
 *   [--package DIR] [--without throttle,debounce,pause]`
 * `npm run torture -- --recheck <run dir> [--profile P]` judges a finished run again (history and final rows kept).
 *
 * Runs the generative fault checker for seed S (then S+1, … while fewer than K seeds ran, or until M minutes
 * passed, whichever asks for more), against dist/ or a deliberately broken copy of it (`--broken claim-ignores-owner`
 * or `purge-deletes-running`), prints each run's summary and every violation with its seed, and exits 1 when
 * any run found one. The long profile defaults to at least 30 minutes. `--package DIR` runs another build of the
 * library (an older one's dist/, say); the workload draws only the features that build has (found in its text, see
 * `detectFeatures`), and `--without` takes more away.
 */
async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const profile = (args.profile ?? 'quick') as TortureProfile['name'];
  if (!(profile in PROFILES)) throw new Error(`--profile must be quick or long, got ${args.profile}`);
  if (args.recheck !== undefined) {
    const seed = Number(/torture-(\d+)-/.exec(args.recheck)?.[1] ?? args.seed ?? 0);
    const report = recheck(args.recheck, seed, profile);
    for (const violation of report.violations) console.log(formatViolation(violation, seed));
    console.log(`seed ${seed}: ${report.violations.length} violation(s) on recheck of ${args.recheck}`);
    process.exitCode = report.violations.length > 0 ? 1 : 0;
    return;
  }
  const firstSeed = integer('seed', args.seed ?? String(Date.now() % 100_000));
  const seeds = integer('seeds', args.seeds ?? '1');
  const minutes = Number(args.minutes ?? (profile === 'long' ? '30' : '0'));
  const seconds = args.seconds === undefined ? undefined : integer('seconds', args.seconds);
  if (args.broken !== undefined && args.package !== undefined)
    throw new Error('--broken and --package exclude each other');
  const packagePath = args.broken === undefined ? args.package : brokenBuild(args.broken as Breakage);
  const features: Partial<PackageFeatures> = {};
  for (const feature of (args.without ?? '').split(',').filter(Boolean)) {
    if (!['throttle', 'debounce', 'pause'].includes(feature)) throw new Error(`--without: unknown feature ${feature}`);
    features[feature as keyof PackageFeatures] = false;
  }
  // One server for every seed (MONGODB_URI, else a test server started once).
  const server = await startTestMongoServer(() => undefined);
  const started = Date.now();
  const reports: TortureReport[] = [];
  // --repeat N runs each seed N times (does a seed reproduce its violation?).
  const repeat = integer('repeat', args.repeat ?? '1');
  for (let run = 0; ; run += 1) {
    const seed = firstSeed + Math.floor(run / repeat);
    const enoughSeeds = reports.length >= seeds * repeat;
    const enoughTime = Date.now() - started >= minutes * 60_000;
    if (enoughSeeds && enoughTime) break;
    const log = args.verbose ? console.log : undefined;
    const report = await runTorture({ seed, seconds, profile, packagePath, features, log, uri: server.uri });
    reports.push(report);
    const { summary } = report;
    console.log(
      `seed ${seed}: ${report.violations.length} violation(s); ${Object.values(summary.operations).reduce((a, b) => a + b, 0)} operations ${JSON.stringify(summary.operations)}; ` +
        `${Object.values(summary.faults).reduce((a, b) => a + b, 0)} faults ${JSON.stringify(summary.faults)}; ` +
        `${Object.values(summary.triggers).reduce((a, b) => a + b, 0)} triggers fired ${JSON.stringify(summary.triggers)}; ` +
        `${summary.handlerCalls} handler calls over ${summary.jobs} jobs; final ${JSON.stringify(summary.finalStatuses)}; history ${report.runDir}`,
    );
    for (const violation of report.violations) console.log(formatViolation(violation, seed));
  }
  await server.stop();
  const failed = reports.filter((report) => report.violations.length > 0);
  console.log(
    `${reports.length} seed(s) in ${Math.round((Date.now() - started) / 1000)} s; ${failed.length} with violations` +
      (failed.length > 0 ? `: ${failed.map((report) => report.seed).join(', ')}` : ''),
  );
  process.exitCode = failed.length > 0 ? 1 : 0;
}

function parseArgs(argv: string[]): Record<string, string | undefined> {
  const args: Record<string, string | undefined> = {};
  for (let i = 0; i < argv.length; i += 1) {
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!match) throw new Error(`unexpected argument ${argv[i]}`);
    if (match[2] !== undefined) args[match[1]] = match[2];
    else if (argv[i + 1] !== undefined && !argv[i + 1].startsWith('--')) args[match[1]] = argv[++i];
    else args[match[1]] = 'true';
  }
  return args;
}

function integer(name: string, value: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 0)
    throw new Error(`--${name} must be a non-negative integer, got ${value}`);
  return parsed;
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 2;
});
