import type { JobDocument } from '../model/job-document.js';

/**
 * A stored job, or the job that kept it from being stored (`deduplicated`): the live holder of its dedupe key, the job
 * of its throttle window, or the pending job of its debounce key, after the replacement.
 */
export interface EnqueueResult {
  doc: JobDocument;
  deduplicated: boolean;
}
