import { describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { Types } from 'mongoose';
import type { JobEvent } from '../../../lib';
import { LastAttempts } from '../../../lib/claim/last-attempts';
import type { JobRetention } from '../../../lib/handlers/job-retention.service';
import type { ClaimedRow } from '../../../lib/model/claimed-job';
import { JobEvents } from '../../../lib/model/events/job-events';
import type { JobsTelemetry } from '../../../lib/model/jobs-telemetry';
import type { ShutdownDeadline } from '../../../lib/model/shutdown-deadline';
import type { JobOutcomeStore } from '../../../lib/persistence/job-outcome.store';

const LOCK = 'w1#7';

/** A reclaimed row on its last attempt (1 of 1), its lease ending `leaseLeftMs` from now (negative: over). */
function reclaimedRow(leaseLeftMs: number): ClaimedRow {
  return {
    _id: new Types.ObjectId(),
    name: 'report',
    status: 'running',
    attemptCount: 1,
    maxAttempts: 1,
    lockedBy: LOCK,
    lockedUntil: new Date(Date.now() + leaseLeftMs),
  } as unknown as ClaimedRow;
}

/**
 * The dead-letter of a reclaim on a job's last attempt, against a controllable store: `deadLetter` answers whether its
 * owner-fenced write matched, `finishedBy` whether this lock finished the row (an earlier copy that landed).
 */
function lastAttempts(store: { deadLetter: boolean; finishedBy: boolean }) {
  const events = new JobEvents();
  const seen: JobEvent[] = [];
  events.events$.subscribe((event) => seen.push(event));
  const telemetry = { leaseLost: jest.fn() };
  const outcomes = {
    deadLetter: jest.fn(async () => store.deadLetter),
    finishedBy: jest.fn(async () => store.finishedBy),
  };
  const subject = new LastAttempts({
    outcomes: outcomes as unknown as JobOutcomeStore,
    retention: { expiresAt: () => undefined } as unknown as JobRetention,
    events,
    telemetry: telemetry as unknown as JobsTelemetry,
    deadline: { endsAt: undefined } as ShutdownDeadline,
    logger: new Logger('test'),
  });
  return { subject, seen, telemetry, outcomes };
}

describe('LastAttempts.keepReclaimed', () => {
  it('keeps a reclaim with attempts left, writing nothing', async () => {
    const { subject, outcomes } = lastAttempts({ deadLetter: true, finishedBy: false });
    const doc = { ...reclaimedRow(30_000), maxAttempts: 3 } as ClaimedRow;
    await expect(subject.keepReclaimed({ doc, lockId: LOCK }, new Date())).resolves.toBe(true);
    expect(outcomes.deadLetter).not.toHaveBeenCalled();
  });

  it('dead-letters a reclaim on the last attempt: `dead`, no lease lost', async () => {
    const { subject, seen, telemetry } = lastAttempts({ deadLetter: true, finishedBy: false });
    const doc = reclaimedRow(30_000);
    await expect(subject.keepReclaimed({ doc, lockId: LOCK }, new Date())).resolves.toBe(false);
    expect(seen.map((event) => event.type)).toEqual(['dead']);
    expect(telemetry.leaseLost).not.toHaveBeenCalled();
  });

  it('records a late reclaim whose row another worker took first as a lost lease: `stale` once, counted once', async () => {
    // Answered after its lease; the dead-letter matched nothing, and the row was not finished by this lock.
    const { subject, seen, telemetry } = lastAttempts({ deadLetter: false, finishedBy: false });
    const doc = reclaimedRow(-1_000);
    await expect(subject.keepReclaimed({ doc, lockId: LOCK }, new Date())).resolves.toBe(false);
    expect(seen).toEqual([
      expect.objectContaining({ type: 'stale', jobId: doc._id.toHexString(), name: 'report', attempt: 2 }),
    ]);
    expect(telemetry.leaseLost).toHaveBeenCalledTimes(1);
    expect(telemetry.leaseLost).toHaveBeenCalledWith('report');
  });

  it('records nothing for a row cancelled within its lease (the cancel decides what it is)', async () => {
    const { subject, seen, telemetry } = lastAttempts({ deadLetter: false, finishedBy: false });
    await expect(subject.keepReclaimed({ doc: reclaimedRow(30_000), lockId: LOCK }, new Date())).resolves.toBe(false);
    expect(seen).toEqual([]);
    expect(telemetry.leaseLost).not.toHaveBeenCalled();
  });
});
