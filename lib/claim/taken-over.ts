import type { ClaimedJob } from '../model/claimed-job.js';
import { LeaseLostError } from '../model/errors/lease-lost.error.js';
import type { JobEvents } from '../model/events/job-events.js';
import type { JobsTelemetry } from '../model/jobs-telemetry.js';

/**
 * A claim nobody ran whose row another worker took first: its answer came after its lease, and a reclaim charged the
 * row a `LeaseExpired` attempt for it. Recorded as a lease lost like any other: a `stale` event with no handler call,
 * counted in the lease-loss metric (a late claim's hand-back, the long checker's seed 556; a late reclaim on a last
 * attempt, seed 3705).
 */
export function recordTakenOver(
  events: JobEvents,
  telemetry: JobsTelemetry | null,
  { doc, lockId }: ClaimedJob,
  jobId: string,
): void {
  const lost = new LeaseLostError(jobId, lockId, 'taken-over');
  events.emit('stale', { jobId, name: doc.name, attempt: doc.attemptCount + 1 }, lost.message);
  telemetry?.leaseLost(doc.name);
}
