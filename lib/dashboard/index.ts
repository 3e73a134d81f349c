// `nestjs-mongo-jobs/dashboard`: the dashboard's JSON API (and, later, its page).

export { DashboardGuardRequiredError } from '../model/errors/dashboard-guard-required.error.js';
export { JobStateConflictError } from '../model/errors/job-state-conflict.error.js';
export { type BulkRetryResult, MAX_BULK_RETRY } from './bulk-retry.js';
export type { DashboardJobRecord } from './dashboard-record.js';
export { DASHBOARD_HEADER } from './dashboard-request.guard.js';
export { JobsDashboardModule } from './jobs-dashboard.module.js';
export type { JobsDashboardOptions } from './jobs-dashboard.options.js';
