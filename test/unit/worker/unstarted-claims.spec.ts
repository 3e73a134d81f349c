import { describe, expect, it, jest } from '@jest/globals';
import type { Logger } from '@nestjs/common';
import { Types } from 'mongoose';
import type { JobFinalizer } from '../../../lib/execution/job-finalizer.service';
import type { ClaimedJob } from '../../../lib/model/claimed-job';
import { JobEvents } from '../../../lib/model/events/job-events';
import { UnstartedClaims } from '../../../lib/worker/unstarted-claims';

/** The hand-back of a claim this process will not start, against a finalizer whose answer the test picks. */
function unstarted(released: boolean | undefined) {
  const warn = jest.fn();
  const subject = new UnstartedClaims({
    finalizer: { releaseUnstarted: async () => released } as unknown as JobFinalizer,
    events: new JobEvents(),
    telemetry: null,
    logger: { warn } as unknown as Logger,
    logError: () => undefined,
  });
  const claim = {
    doc: { _id: new Types.ObjectId(), name: 'report', attemptCount: 1 },
    lockId: 'w1#9',
  } as unknown as ClaimedJob;
  return { subject, warn, claim };
}

describe('UnstartedClaims.handBack', () => {
  it('records an unanswered hand-back by its lock outside shutdown too (a name paused meanwhile: long seed 4400)', async () => {
    const { subject, warn, claim } = unstarted(undefined);
    await expect(subject.handBack(claim, 'j1', false)).resolves.toBeUndefined();
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0][0])).toContain('handing back a claim (lock w1#9) got no answer in time');
    expect(subject.shutdownHandBacks).toEqual([]);
  });

  it('at shutdown, says so and counts it in the summary', async () => {
    const { subject, warn, claim } = unstarted(undefined);
    await subject.handBack(claim, 'j1', true);
    expect(String(warn.mock.calls[0][0])).toContain(
      'handing back a claim at shutdown (lock w1#9) got no answer in time',
    );
    expect(subject.shutdownHandBacks).toEqual([{ jobId: 'j1', fate: 'left' }]);
  });

  it('says nothing when the hand-back landed', async () => {
    const { subject, warn, claim } = unstarted(true);
    await expect(subject.handBack(claim, 'j1', false)).resolves.toBe(true);
    expect(warn).not.toHaveBeenCalled();
  });
});
