import { describe, expect, it } from '@jest/globals';
import type { RowFate } from '../../../lib/execution/row-fate';
import { describeShutdown } from '../../../lib/worker/shutdown-summary';

const jobs = (fate: RowFate, count: number, prefix: string = fate) =>
  Array.from({ length: count }, (_, i) => ({ jobId: `${prefix}${i}`, fate }));

describe('describeShutdown', () => {
  it('says when nothing was running', () => {
    expect(describeShutdown({ fates: [], unansweredClaims: 0 })).toBe('no job was running');
  });

  it('counts finished, released and left jobs, naming the ones left to their leases', () => {
    expect(
      describeShutdown({
        fates: [...jobs('finished', 3), ...jobs('released', 1), ...jobs('left', 2)],
        unansweredClaims: 0,
      }),
    ).toBe('3 jobs finished, 1 released, 2 left to their leases (ids left0, left1)');
    expect(describeShutdown({ fates: jobs('finished', 1), unansweredClaims: 0 })).toBe(
      '1 job finished, 0 released, 0 left to their leases',
    );
  });

  it('adds rows no longer this worker’s and unanswered claims only when there are some', () => {
    expect(describeShutdown({ fates: [...jobs('left', 1), ...jobs('not_ours', 2)], unansweredClaims: 1 })).toBe(
      "0 jobs finished, 0 released, 1 left to its lease (ids left0), 2 no longer this worker's (cancelled or " +
        'taken over), 1 claim unanswered (reclaimed after the lease)',
    );
  });

  it('lists at most 20 ids, and counts the rest', () => {
    const line = describeShutdown({ fates: jobs('left', 23, 'j'), unansweredClaims: 0 });
    expect(line).toContain('23 left to their leases (ids j0, j1,');
    expect(line).toContain('j19 and 3 more)');
    expect(line).not.toContain('j20');
  });
});
