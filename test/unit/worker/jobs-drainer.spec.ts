import { describe, expect, it } from '@jest/globals';
import type { JobClaimService } from '../../../lib/claim/job-claim.service';
import type { PausedNames } from '../../../lib/claim/paused-names';
import { DrainTimeoutError } from '../../../lib/model/errors/drain-timeout.error';
import { JobEvents } from '../../../lib/model/events/job-events';
import type { ResolvedJobsOptions } from '../../../lib/model/jobs.options';
import type { JobReadStore } from '../../../lib/persistence/job-read.store';
import { JobsDrainer } from '../../../lib/worker/jobs-drainer';

/** No name paused: these tests are about the reads. */
const noPauses = { read: async () => [], has: () => false } as unknown as PausedNames;

type Group = Awaited<ReturnType<JobReadStore['countUnfinished']>>[number];

const retrying: Group = { _id: { name: 'a', status: 'pending' }, count: 1, firstId: 'x', expiredLeases: 0 };

/** A drainer whose reads answer `answers` in turn (the last one from then on); `reads` counts them. */
function drainerReading(answers: Group[][]): { drainer: JobsDrainer; reads: () => number } {
  let count = 0;
  const repository = {
    countUnfinished: async () => answers[Math.min(count++, answers.length - 1)],
  } as unknown as JobReadStore;
  const claims = { runNames: () => ['a'] } as unknown as JobClaimService;
  const options = { worker: true, pollIntervalMs: 10 } as ResolvedJobsOptions;
  return { drainer: new JobsDrainer(repository, new JobEvents(), claims, options, noPauses), reads: () => count };
}

describe('JobsDrainer reads', () => {
  it('does not end on one empty read: a job moving from running back to pending mid-read can be missed by it', async () => {
    const { drainer, reads } = drainerReading([[], [retrying], [], []]);
    const error = await drainer.drain({ timeoutMs: 1_000 }).catch((e: unknown) => e);
    // Confirmed empty only at the 3rd and 4th reads: a drain that trusted the first read would have ended at once.
    expect(error).toBeUndefined();
    expect(reads()).toBe(4);
  });

  it('ends after two empty reads in a row', async () => {
    const { drainer, reads } = drainerReading([[]]);
    await drainer.drain({ timeoutMs: 1_000 });
    expect(reads()).toBe(2);
  });

  it('gives up with the read error as its cause when the collection cannot be read', async () => {
    const outage = new Error('connection refused');
    const repository = { countUnfinished: async () => Promise.reject(outage) } as unknown as JobReadStore;
    const claims = { runNames: () => ['a'] } as unknown as JobClaimService;
    const options = { worker: true, pollIntervalMs: 10 } as ResolvedJobsOptions;
    const drainer = new JobsDrainer(repository, new JobEvents(), claims, options, noPauses);
    const error = (await drainer.drain({ timeoutMs: 30 }).catch((e: unknown) => e)) as DrainTimeoutError;
    expect(error).toBeInstanceOf(DrainTimeoutError);
    expect(error.left).toEqual([]);
    expect(error.cause).toBe(outage);
    expect(error.message).toContain('Could not confirm within 30 ms');
  });
});
