// Ends every run with one plain line, "Jest: N passed, N failed, N skipped", that any CI log reader understands.
// Skipped tests are listed above it by name: the only skips allowed carry their reason in their name (a feature the
// test server lacks), and a skip nobody sees would pass for a test that ran.
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const { numPassedTests, numFailedTests, numPendingTests, numTodoTests } = results;
    for (const file of results.testResults) {
      for (const test of file.testResults) {
        if (test.status === 'pending' || test.status === 'todo') process.stdout.write(`Skipped: ${test.fullName}\n`);
      }
    }
    process.stdout.write(
      `Jest: ${numPassedTests} passed, ${numFailedTests} failed, ${numPendingTests + numTodoTests} skipped\n`,
    );
  }
}

module.exports = SummaryReporter;
