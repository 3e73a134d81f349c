// Runs the suite in three phases, in the sequencer's order within each:
//   1. the conformance suite, in band (if the server cannot give atomic claims, nothing else means anything);
//   2. the files that need no quiet machine (unit tests, compilations, package builds, the harness's own server
//      starts: CPU work with nothing timed against the shared test server), in parallel workers (`maxWorkers` in jest.config.cjs);
//   3. everything else, in band, one file at a time: the lease, chaos and e2e tests use 150–500 ms leases against one
//      single-threaded test server, and files running beside them add latency spikes that make such leases
//      legitimately expire. Phase 2 has ended before phase 3 starts, so nothing runs beside them.
// `--runInBand` (or a run jest itself puts in band, e.g. a single file) keeps every file in band.
const { sep } = require('node:path');
const TestRunner = require('jest-runner').default;
const { isConformance } = require('./conformance-first.sequencer.cjs');

const PARALLEL_DIRECTORIES = ['unit', 'types', 'architecture', 'package', 'harness'].map(
  (dir) => `${sep}test${sep}${dir}${sep}`,
);

/** True for a file that may run beside others: nothing in it times a lease against the shared server. */
const runsInParallel = (test) => PARALLEL_DIRECTORIES.some((dir) => test.path.includes(dir));

class PhasedRunner extends TestRunner {
  async runTests(tests, watcher, options) {
    if (options.serial) return super.runTests(tests, watcher, options);
    const first = tests.filter(isConformance);
    const parallel = tests.filter((test) => !isConformance(test) && runsInParallel(test));
    const serial = tests.filter((test) => !isConformance(test) && !runsInParallel(test));
    for (const [phase, inBand] of [
      [first, true],
      [parallel, parallel.length < 2],
      [serial, true],
    ]) {
      if (phase.length === 0) continue;
      if (watcher.isInterrupted()) return;
      await super.runTests(phase, watcher, { ...options, serial: inBand });
    }
  }
}

module.exports = PhasedRunner;
module.exports.runsInParallel = runsInParallel;
