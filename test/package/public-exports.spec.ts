import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import ts from 'typescript';

/**
 * The public surface, entry point by entry point: every name the package exports (`type X` for a type-only one), read
 * from the declarations both builds ship and checked against what each build exports at run time. A change here is a
 * change to what applications may import: make it on purpose, update this list in the same change, and record moved
 * or removed names in CHANGELOG.md. `npm test` builds first.
 */
const PUBLIC_EXPORTS: Record<string, string[]> = {
  '.': [
    'DashboardGuardRequiredError',
    'DedupeConflictError',
    'DedupeKeyContendedError',
    'DrainTimeoutError',
    'DuplicateJobHandlerError',
    'IndexConflictError',
    'IndexSetupTimeoutError',
    'InvalidCursorError',
    'InvalidDurationError',
    'InvalidJobIdError',
    'InvalidOptionError',
    'InvalidPayloadError',
    'InvalidProgressError',
    'InvalidSessionError',
    'JOB_HANDLER_METADATA',
    'JobCancelledError',
    'JobHandler',
    'JobNotFoundError',
    'JobStateConflictError',
    'JobTimeoutError',
    'JobsError',
    'JobsExceptionFilter',
    'JobsModule',
    'JobsModuleImportedTwiceError',
    'JobsService',
    'LeaseLostError',
    'MAX_ENQUEUE_ATTEMPTS',
    'MAX_PING_TIMEOUT_MS',
    'MAX_PURGE_LIMIT',
    'MongooseConnectionMissingError',
    'RequestScopedJobHandlerError',
    'RetryContendedError',
    'UniqueIndexRejectedJobError',
    'UnknownJobError',
    'UnrecoverableJobError',
    'UnstorableResultError',
    'WaitTimeoutError',
    'WorkerShutdownError',
    'jobErrorMessage',
    'jobErrorStatus',
    'requireJob',
    'type BackoffOptions',
    'type CatalogueEnqueueArgs',
    'type CatalogueEnqueueItem',
    'type DebounceWindow',
    'type DeclaredJobName',
    'type DrainLeftover',
    'type DrainOptions',
    'type EnqueueItem',
    'type EnqueueItemOptions',
    'type EnqueueManyItems',
    'type EnqueueManyOptions',
    'type EnqueueOptions',
    'type EnqueueWindow',
    'type EnqueuedJobRecord',
    'type FinishedStatus',
    'type HandlerRetentionOptions',
    'type JobAttempt',
    'type JobEvent',
    'type JobEventType',
    'type JobExecutionContext',
    'type JobHandlerDecorator',
    'type JobHandlerOptions',
    'type JobListPage',
    'type JobLogLine',
    'type JobMetrics',
    'type JobMetricsBucket',
    'type JobMetricsOptions',
    'type JobName',
    'type JobNameMetrics',
    'type JobPayload',
    'type JobPayloads',
    'type JobProgress',
    'type JobRecord',
    'type JobResult',
    'type JobResults',
    'type JobStatus',
    'type JobsModuleExtras',
    'type JobsModuleOptions',
    'type JobsOptionsFactory',
    'type JobsWorker',
    'type JobsWorkerStatus',
    'type ListJobsOptions',
    'type NamePauseEvent',
    'type PausedName',
    'type PurgeOptions',
    'type RetentionOptions',
    'type RunNowConflictReason',
    'type RunNowOutcome',
    'type StoredPayload',
    'type TelemetryOptions',
    'type UncataloguedEnqueueArgs',
    'type UncataloguedEnqueueItem',
    'type UncataloguedEnqueueOptions',
    'type UncataloguedJobName',
    'type WorkerStatusOptions',
  ],
  './health': ['JobsHealthIndicator', 'JobsHealthModule', 'type JobsHealthDetails'],
  './dashboard': [
    'DASHBOARD_HEADER',
    'DashboardGuardRequiredError',
    'JobStateConflictError',
    'JobsDashboardModule',
    'MAX_BULK_RETRY',
    'type BulkRetryResult',
    'type DashboardJobRecord',
    'type JobsDashboardOptions',
  ],
  './testing': ['createTestJobContext', 'type TestJobContext', 'type TestJobContextOverrides'],
};

interface ConditionalEntry {
  import: { types: string; default: string };
  require: { types: string; default: string };
}

const packageJson = JSON.parse(readFileSync('package.json', 'utf8')) as {
  name: string;
  exports: Record<string, ConditionalEntry | string>;
};
/** The exports map's entry points (`./package.json` is a file, not code). */
const entries = Object.entries(packageJson.exports).filter(
  (entry): entry is [string, ConditionalEntry] => typeof entry[1] === 'object',
);
const specifierOf = (subpath: string) =>
  subpath === '.' ? packageJson.name : `${packageJson.name}/${subpath.slice(2)}`;
const valuesOf = (names: string[]) => names.filter((name) => !name.startsWith('type '));

/** The names a declaration file exports, sorted; `type X` for a type, or a value exported with `export type`. */
function declaredExports(program: ts.Program, file: string): string[] {
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  if (!source) throw new Error(`${file} is not built (npm test builds first)`);
  const module = checker.getSymbolAtLocation(source);
  if (!module) throw new Error(`${file} exports nothing`);
  return checker
    .getExportsOfModule(module)
    .map((symbol) => {
      const typeOnly = symbol.declarations?.some(
        (declaration) =>
          ts.isExportSpecifier(declaration) && (declaration.isTypeOnly || declaration.parent.parent.isTypeOnly),
      );
      const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
      return !typeOnly && target.flags & ts.SymbolFlags.Value ? symbol.name : `type ${symbol.name}`;
    })
    .sort();
}

describe('the public exports', () => {
  it('lists every entry point of the exports map', () => {
    expect(entries.map(([subpath]) => subpath).sort()).toEqual(Object.keys(PUBLIC_EXPORTS).sort());
  });

  it('are what both builds declare, entry point by entry point', () => {
    const files = entries.flatMap(([, entry]) => [entry.require.types, entry.import.types]);
    const program = ts.createProgram(files, {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      skipLibCheck: true,
      noEmit: true,
    });
    for (const [subpath, entry] of entries) {
      const expected = [...PUBLIC_EXPORTS[subpath]].sort();
      expect({ subpath, build: 'CommonJS', names: declaredExports(program, entry.require.types) }).toEqual({
        subpath,
        build: 'CommonJS',
        names: expected,
      });
      expect({ subpath, build: 'ES module', names: declaredExports(program, entry.import.types) }).toEqual({
        subpath,
        build: 'ES module',
        names: expected,
      });
    }
  }, 60_000);

  it('export their values at run time from the ES module build', async () => {
    // A variable, so that TypeScript does not resolve the built package when typechecking (dist/ may not exist yet).
    const load = (specifier: string): Promise<Record<string, unknown>> => import(specifier);
    for (const [subpath] of entries) {
      const names = Object.keys(await load(specifierOf(subpath))).sort();
      expect({ subpath, names }).toEqual({ subpath, names: valuesOf(PUBLIC_EXPORTS[subpath]).sort() });
    }
  });

  it('export their values at run time from the CommonJS build', () => {
    // In a Node process of its own: Jest runs in ESM mode, and its module registry is not Node's require().
    const script = `console.log(JSON.stringify(${JSON.stringify(entries.map(([subpath]) => specifierOf(subpath)))}.map((s) => Object.keys(require(s)).sort())))`;
    const loaded = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30_000 }));
    expect(Object.fromEntries(entries.map(([subpath], index) => [subpath, loaded[index]]))).toEqual(
      Object.fromEntries(entries.map(([subpath]) => [subpath, valuesOf(PUBLIC_EXPORTS[subpath]).sort()])),
    );
  }, 40_000);
});
