// Runs the suite in three phases, in the sequencer's order within each:
//   1. the conformance suite, in band (if the server cannot give atomic claims, nothing else means anything);
//   2. the files that need no quiet machine (unit tests, compilations, package builds, the harness's own server
//      starts: CPU work with nothing timed against the shared test server; and the server tests listed in
//      UNTIMED_SERVER_FILES), in parallel workers (`maxWorkers` in jest.config.cjs);
//      Also there: the files that start heavy processes of their own but time nothing against a short in-process lease
//      (HEAVY_NEIGHBOURS: the Chromium tests, the generative checker's process fleets). They load the machine in bursts
//      far beyond a busy loop, so they must not run beside the lease tests.
//   3. everything else: the lease, chaos and e2e tests, which use 150–500 ms leases. Phase 2 has ended before phase 3
//      starts, so no compilation, browser or checker fleet runs beside them; they run in the same parallel workers,
//      each worker with a test server of its own when the harness starts the single-threaded Java server
//      (test/support/global-setup.ts), so that one file's commands never queue behind another's. They are written to
//      hold under load (two busy loops beside them: CONTRIBUTING.md), which is what the file beside each of them is.
//      Two fresh-clone CI runs of this phase failed heartbeat.spec while a Chromium test started beside it, before
//      the browser tests moved to phase 2.
// `--runInBand` (or a run jest itself puts in band, e.g. a single file) keeps every file in band.
const { sep } = require('node:path');
const TestRunner = require('jest-runner').default;
const { isConformance } = require('./conformance-first.sequencer.cjs');

const PARALLEL_DIRECTORIES = ['unit', 'types', 'architecture', 'package', 'harness'].map(
  (dir) => `${sep}test${sep}${dir}${sep}`,
);

/**
 * Files outside those directories that may run beside others too: they talk to the test server, but with the default
 * 30 s lease, no timed assertion and no connection drops (or not at all), so a busy machine only slows them down.
 * A file that starts timing something, shortens a lease or drops a connection must leave this list.
 */
const UNTIMED_SERVER_FILES = [
  'chaos/execution-records.spec.ts',
  'e2e/dashboard-api.spec.ts',
  'e2e/dashboard-cross-site.spec.ts',
  'e2e/dashboard-page.spec.ts',
  'e2e/dashboard-purge-limit.spec.ts',
  'e2e/dashboard-route-metadata.spec.ts',
  'e2e/dashboard-stacks.spec.ts',
  'e2e/jobs-exception-filter.spec.ts',
  'e2e/sample.spec.ts',
  'e2e/testing-kit-readme.spec.ts',
  'integration/bson-look-alikes.spec.ts',
  'integration/dedupe.spec.ts',
  'integration/guarantee-indexes.spec.ts',
  'integration/job-list.spec.ts',
  'integration/job-metrics.spec.ts',
  'integration/payload-round-trip.spec.ts',
  'integration/run-now-limits.spec.ts',
  'integration/telemetry-absent.spec.ts',
  'integration/telemetry-labels.spec.ts',
  'integration/telemetry.spec.ts',
  'integration/transactional-enqueue.replset.spec.ts',
  'integration/transactional-enqueue.spec.ts',
  'integration/unnamed-duplicate-keys.spec.ts',
  'torture/checker.spec.ts',
];

/**
 * Files that start heavy processes (a browser, a fleet of worker processes) and hold under load themselves: the browser
 * tests use the default 30 s lease and wait for conditions; the checker's runs tolerate late timers and retry a run
 * whose planned faults did not happen. They run in phase 2, never beside a short lease.
 */
const HEAVY_NEIGHBOURS = [
  'e2e/dashboard-actions-browser.spec.ts',
  'e2e/dashboard-browser.spec.ts',
  'e2e/dashboard-cross-site-browser.spec.ts',
  'e2e/dashboard-operator-browser.spec.ts',
  'e2e/dashboard-scale-browser.spec.ts',
  'e2e/dashboard-stacks-browser.spec.ts',
  'torture/checker-teeth.spec.ts',
  'torture/torture-quick.spec.ts',
];

const inTest = (file) => `${sep}test${sep}${file.split('/').join(sep)}`;
const PARALLEL_FILES = [...UNTIMED_SERVER_FILES, ...HEAVY_NEIGHBOURS].map(inTest);

/** True for a file that may run beside others: nothing in it times a short lease against the test server. */
const runsInParallel = (test) =>
  PARALLEL_DIRECTORIES.some((dir) => test.path.includes(dir)) ||
  PARALLEL_FILES.some((file) => test.path.endsWith(file));

class PhasedRunner extends TestRunner {
  async runTests(tests, watcher, options) {
    if (options.serial) return super.runTests(tests, watcher, options);
    const first = tests.filter(isConformance);
    const parallel = tests.filter((test) => !isConformance(test) && runsInParallel(test));
    const timed = tests.filter((test) => !isConformance(test) && !runsInParallel(test));
    for (const [phase, inBand] of [
      [first, true],
      [parallel, parallel.length < 2],
      [timed, timed.length < 2],
    ]) {
      if (phase.length === 0) continue;
      if (watcher.isInterrupted()) return;
      await super.runTests(phase, watcher, { ...options, serial: inBand });
    }
  }
}

module.exports = PhasedRunner;
module.exports.runsInParallel = runsInParallel;
