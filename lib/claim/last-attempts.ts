import type { Logger } from '@nestjs/common';
import type { JobRetention } from '../handlers/job-retention.service.js';
import type { ClaimedJob } from '../model/claimed-job.js';
import { LeaseLostError } from '../model/errors/lease-lost.error.js';
import type { JobEvents } from '../model/events/job-events.js';
import type { ShutdownDeadline } from '../model/shutdown-deadline.js';
import type { JobOutcomeStore } from '../persistence/job-outcome.store.js';
import { HAND_BACK_WINDOW_MS } from './claims-in-doubt.js';
import { sendOwnedWrite } from './owned-write.js';

export interface LastAttemptsDeps {
  outcomes: JobOutcomeStore;
  retention: JobRetention;
  events: JobEvents;
  deadline: ShutdownDeadline;
  logger: Logger;
}

/** What becomes of a reclaimed row whose lost attempt was its last: dead-lettered, never run (poll loop and runNow). */
export class LastAttempts {
  constructor(private readonly deps: LastAttemptsDeps) {}

  /**
   * False (and the row dead-lettered) when the reclaim's lost attempt was the job's last. The dead-letter is sent
   * again through errors until the hand-back window past the reclaim's lease, or shutdown's hard bound
   * (`sendOwnedWrite`): a row left under that lock would be reclaimed again and charged a second attempt for a claim
   * that ran nothing (seed 404). Past the lease too, like a late claim's hand-back: the write is owner-fenced, so it
   * lands only while nobody else took the row (the long checker's seed 3703: a reclaim answered 1.1 s late, after its
   * own lease, gave up at once, and the row was charged a second attempt of 1).
   */
  async keepReclaimed({ doc, lockId }: ClaimedJob, at: Date): Promise<boolean> {
    if (doc.attemptCount < doc.maxAttempts) return true;
    const { outcomes, retention, events, deadline, logger } = this.deps;
    const label = `Job ${doc._id.toHexString()} (${doc.name})`;
    const expiresAt = retention.expiresAt('dead', doc, at);
    // Fixed now: a bound read again at each step would move with the clock once the lease is over.
    const until = Math.max(doc.lockedUntil?.getTime() ?? 0, Date.now()) + HAND_BACK_WINDOW_MS;
    const written = await sendOwnedWrite(
      () => outcomes.deadLetter(doc._id, lockId, at, expiresAt),
      () => outcomes.finishedBy(doc._id, lockId),
      until,
      deadline,
    );
    if (written) {
      const about = { jobId: doc._id.toHexString(), name: doc.name, attempt: doc.attemptCount };
      events.emit('dead', about, doc.lastError ?? 'Lease expired');
      logger.warn(`${label} dead-lettered: its lease expired on the last of ${doc.maxAttempts} attempts`);
    } else if (written === false && Date.now() > (doc.lockedUntil?.getTime() ?? 0)) {
      // Answered after its lease, and another worker reclaimed the row first (charging it for this claim): a lease
      // lost like any other, recorded as one (`stale`, no handler call), as a late claim's hand-back does (seed 3705).
      const jobId = doc._id.toHexString();
      const lost = new LeaseLostError(jobId, lockId, 'taken-over');
      events.emit('stale', { jobId, name: doc.name, attempt: doc.attemptCount + 1 }, lost.message);
    } else if (written === undefined) {
      logger.warn(
        `${label} is on its last attempt, whose lease expired, but could not be dead-lettered under lock ${lockId} ` +
          "within the hand-back window past that reclaim's lease (or before shutdown), or was refused for the " +
          'document; it is reclaimed again',
      );
    }
    // false: cancelled (within the lease, only a cancel takes the row) or taken over meanwhile; whoever did it decides.
    return false;
  }
}
