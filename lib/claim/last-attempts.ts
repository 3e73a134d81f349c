import type { Logger } from '@nestjs/common';
import type { JobRetention } from '../handlers/job-retention.service.js';
import type { ClaimedJob } from '../model/claimed-job.js';
import type { JobEvents } from '../model/events/job-events.js';
import type { JobsTelemetry } from '../model/jobs-telemetry.js';
import type { ShutdownDeadline } from '../model/shutdown-deadline.js';
import type { JobOutcomeStore } from '../persistence/job-outcome.store.js';
import { handBackUntil } from './claims-in-doubt.js';
import { sendOwnedWrite } from './owned-write.js';
import { recordTakenOver } from './taken-over.js';

export interface LastAttemptsDeps {
  outcomes: JobOutcomeStore;
  retention: JobRetention;
  events: JobEvents;
  telemetry: JobsTelemetry | null;
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
    const { outcomes, retention, events, telemetry, deadline, logger } = this.deps;
    const jobId = doc._id.toHexString();
    const label = `Job ${jobId} (${doc.name})`;
    const expiresAt = retention.expiresAt('dead', doc, at);
    const written = await sendOwnedWrite(
      () => outcomes.deadLetter(doc._id, lockId, at, expiresAt),
      () => outcomes.finishedBy(doc._id, lockId),
      handBackUntil(doc.lockedUntil),
      deadline,
    );
    if (written) {
      const about = { jobId, name: doc.name, attempt: doc.attemptCount };
      events.emit('dead', about, doc.lastError ?? 'Lease expired');
      logger.warn(`${label} dead-lettered: its lease expired on the last of ${doc.maxAttempts} attempts`);
    } else if (written === false && Date.now() > (doc.lockedUntil?.getTime() ?? 0)) {
      // Answered after its lease, and another worker reclaimed the row first (charging it for this claim).
      recordTakenOver(events, telemetry, { doc, lockId }, jobId);
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
