/**
 * Jest runs in ESM mode (`--experimental-vm-modules`): NestJS 12 packages are ESM-only and
 * jest's CommonJS runtime cannot require() them. Test files import from '@jest/globals'.
 * @type {import('jest').Config}
 */
module.exports = {
  testEnvironment: 'node',
  rootDir: '.',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.spec.ts'],
  // test/consumers/ holds apps with test runners of their own (scripts/check-consumers.mjs runs them).
  testPathIgnorePatterns: ['/node_modules/', '/test/benchmark/', '/test/consumers/'],
  extensionsToTreatAsEsm: ['.ts'],
  // `.cts`: lib/dashboard/dashboard-directory.cts, CommonJS in every build (it gives the dashboard its `__dirname`).
  transform: {
    '^.+\\.c?ts$': ['ts-jest', { useESM: true, tsconfig: '<rootDir>/tsconfig.json' }],
  },
  // The library's sources import each other with `.js` (what Node's ES module resolution needs in dist/esm/); jest
  // resolves them to the `.ts` files. Likewise `./dashboard-directory.cjs`, to the `.cts` (or, in dist/, the built
  // `.cjs`): only that name, since a `.cjs` stripped of its extension in general would resolve a dependency's
  // `x.cjs` to its `x.mjs` next to it (as @opentelemetry/semantic-conventions has).
  moduleNameMapper: {
    '^(\\.{1,2}/.*)\\.js$': '$1',
    '^(\\.{1,2}/(?:.*/)?dashboard-directory)\\.cjs$': '$1',
  },
  setupFiles: ['reflect-metadata'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testSequencer: '<rootDir>/test/support/conformance-first.sequencer.cjs',
  reporters: ['default', '<rootDir>/test/support/summary-reporter.cjs'],
  // Unit tests, compilations and package builds run in parallel workers, then everything that talks to the test server
  // with short leases runs one file at a time, with nothing beside it: see test/support/phased.runner.cjs.
  runner: '<rootDir>/test/support/phased.runner.cjs',
  maxWorkers: 2,
  testTimeout: 30_000,
};
