import type { Lease } from '../lease/lease.js';
import type { JobEventSubject } from '../model/events/job-events.js';

/** The warning for a handler still running `settleMs` after its abort. */
export function ignoredAbortMessage(about: JobEventSubject, settleMs: number, reason: Error, lease: Lease): string {
  const still = `Job ${about.jobId} (${about.name}) ignores its signal: still running ${settleMs} ms after it was aborted`;
  if (lease.isCancelled) {
    return (
      `${still} (${reason.message}). The job was cancelled: this slot is freed now, and a retry of it may run once ` +
      "the cancelled run's deadline (its lockedUntil) has passed, while this handler may still be running."
    );
  }
  return (
    `${still} (${reason.message}). Its lease is no longer renewed; the job is taken over once it runs out ` +
    `(${lease.expiresAt.toISOString()}), and this slot is freed then.`
  );
}
