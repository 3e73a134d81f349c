// Runs the suite in three phases, in the sequencer's order within each:
//   1. the conformance suite, in band (if the server cannot give atomic claims, nothing else means anything);
//   2. the files that need no quiet machine (unit tests, compilations, package builds, the harness's own server
//      starts: CPU work with nothing timed against the shared test server; and the server tests listed in
//      UNTIMED_SERVER_FILES), in parallel workers (`maxWorkers` in jest.config.cjs);
//   3. everything else, in band, one file at a time: the lease, chaos and e2e tests use 150–500 ms leases, and a file
//      beside them (on a fresh clone, one still compiling its TypeScript cold) stalls them past such a lease: two
//      fresh-clone CI runs with two workers here failed heartbeat.spec that way. Phase 2 has ended before phase 3
//      starts, so nothing runs beside them.
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
].map((file) => `${sep}test${sep}${file.split('/').join(sep)}`);

/** True for a file that may run beside others: nothing in it times a lease against the shared server. */
const runsInParallel = (test) =>
  PARALLEL_DIRECTORIES.some((dir) => test.path.includes(dir)) ||
  UNTIMED_SERVER_FILES.some((file) => test.path.endsWith(file));

class PhasedRunner extends TestRunner {
  async runTests(tests, watcher, options) {
    if (options.serial) return super.runTests(tests, watcher, options);
    const first = tests.filter(isConformance);
    const parallel = tests.filter((test) => !isConformance(test) && runsInParallel(test));
    const timed = tests.filter((test) => !isConformance(test) && !runsInParallel(test));
    for (const [phase, inBand] of [
      [first, true],
      [parallel, parallel.length < 2],
      [timed, true],
    ]) {
      if (phase.length === 0) continue;
      if (watcher.isInterrupted()) return;
      await super.runTests(phase, watcher, { ...options, serial: inBand });
    }
  }
}

module.exports = PhasedRunner;
module.exports.runsInParallel = runsInParallel;
