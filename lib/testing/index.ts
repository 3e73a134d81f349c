// `nestjs-mongo-jobs/testing`: helpers for users' tests of their handlers (no MongoDB, no Nest needed).

export { createTestJobContext, type TestJobContext, type TestJobContextOverrides } from './test-job-context.js';
