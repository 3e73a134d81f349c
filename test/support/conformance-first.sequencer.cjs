// Runs the MongoDB substrate conformance suite before everything else: if the server cannot
// give us atomic claims and unique indexes, no other result means anything.
const { sep } = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;

const isConformance = (test) => test.path.includes(`${sep}conformance${sep}`);

class ConformanceFirstSequencer extends Sequencer {
  async sort(tests) {
    const sorted = await super.sort(tests);
    return [...sorted.filter(isConformance), ...sorted.filter((test) => !isConformance(test))];
  }
}

module.exports = ConformanceFirstSequencer;
module.exports.isConformance = isConformance;
