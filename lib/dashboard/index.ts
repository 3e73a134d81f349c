// `nestjs-mongo-jobs/dashboard`: the dashboard's JSON API (and, later, its page).

export { DashboardGuardRequiredError } from '../errors/dashboard-guard-required.error';
export { JobStateConflictError } from '../errors/job-state-conflict.error';
export { type BulkRetryResult, MAX_BULK_RETRY } from './bulk-retry';
export type { DashboardJobRecord } from './dashboard-record';
export { DASHBOARD_HEADER } from './dashboard-request.guard';
export { JobsDashboardModule } from './jobs-dashboard.module';
export type { JobsDashboardOptions } from './jobs-dashboard.options';
