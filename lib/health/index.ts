// `nestjs-mongo-jobs/health`: the only entry point that loads @nestjs/terminus (an optional peer).

export { type JobsHealthDetails, JobsHealthIndicator } from './jobs.health-indicator.js';
export { JobsHealthModule } from './jobs-health.module.js';
