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
  testPathIgnorePatterns: ['/node_modules/', '/test/benchmark/'],
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: '<rootDir>/tsconfig.json' }],
  },
  // The library's sources import each other with `.js` (what Node's ES module resolution needs in dist/esm/); jest
  // resolves them to the `.ts` files.
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  setupFiles: ['reflect-metadata'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testSequencer: '<rootDir>/test/support/conformance-first.sequencer.cjs',
  reporters: ['default', '<rootDir>/test/support/summary-reporter.cjs'],
  // One file at a time: the lease tests use 150–500 ms leases, and parallel files sharing one (single-threaded)
  // test server add latency spikes that make such short leases legitimately expire.
  maxWorkers: 1,
  testTimeout: 30_000,
};
