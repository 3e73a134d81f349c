import { JobAdminStore } from './job-admin.store.js';
import { JobChangesStore } from './job-changes.store.js';
import { JobClaimStore } from './job-claim.store.js';
import { JobEnqueueStore } from './job-enqueue.store.js';
import { JobIndexStore } from './job-index.store.js';
import { JobLeaseStore } from './job-lease.store.js';
import { JobOutcomeStore } from './job-outcome.store.js';
import { JobReadStore } from './job-read.store.js';
import { JobRetentionStore } from './job-retention.store.js';
import { JobWindowStore } from './job-window.store.js';

/**
 * The jobs collection's stores, one per step of a job's flow: every query and update on it is in one of them, and
 * services never build queries themselves.
 */
export const JOB_STORES = [
  JobIndexStore,
  JobEnqueueStore,
  JobWindowStore,
  JobClaimStore,
  JobLeaseStore,
  JobOutcomeStore,
  JobAdminStore,
  JobRetentionStore,
  JobReadStore,
  JobChangesStore,
] as const;
