import { describe, expect, it } from '@jest/globals';
import { InvalidOptionError } from '../../lib';
import { resolveJobsOptions } from '../../lib/jobs-options.resolver';
import { heartbeatIntervalFor } from '../../lib/lease/lease-heartbeat.service';

describe('resolveJobsOptions', () => {
  it('derives heartbeatIntervalMs from leaseMs', () => {
    expect(resolveJobsOptions({ leaseMs: 9000 }).heartbeatIntervalMs).toBe(3000);
  });

  it('keeps explicit values and a given workerId', () => {
    expect(resolveJobsOptions({ workerId: 'w1', heartbeatIntervalMs: 10, leaseMs: 100 })).toMatchObject({
      workerId: 'w1',
      heartbeatIntervalMs: 10,
      leaseMs: 100,
    });
  });

  it.each([
    [{ worker: 'yes' as unknown as boolean }, 'worker'],
    [{ backoff: { baseMs: 10, maxMs: 5 } }, 'backoff.maxMs'],
    [{ collectionName: '' }, 'collectionName'],
    [{ workerId: '' }, 'workerId'],
    [{ runOnly: 'heavy' as unknown as string[] }, 'runOnly'],
    [{ runOnly: [] }, 'runOnly'],
    [{ runOnly: ['heavy', ''] }, 'runOnly[1]'],
    [{ indexSetupTimeoutMs: 0 }, 'indexSetupTimeoutMs'],
  ])('rejects %j naming %s', (options, option) => {
    expect(() => resolveJobsOptions(options)).toThrow(InvalidOptionError);
    expect(() => resolveJobsOptions(options)).toThrow(`Invalid option ${option}`);
  });

  it('keeps runOnly without duplicates, and leaves it unset by default (every handled name)', () => {
    expect(resolveJobsOptions({ runOnly: ['heavy', 'heavy', 'video'] }).runOnly).toEqual(['heavy', 'video']);
    expect(resolveJobsOptions({}).runOnly).toBeUndefined();
  });
});

describe("heartbeatIntervalFor (a handler's lease against the module's)", () => {
  const module = { leaseMs: 30_000, heartbeatIntervalMs: 5_000 };

  it("renews a handler on the module's lease at the module's (configured) interval", () => {
    expect(heartbeatIntervalFor(30_000, module)).toBe(5_000);
  });

  it('renews a longer handler lease at a third of it', () => {
    expect(heartbeatIntervalFor(90_000, module)).toBe(30_000);
  });
});
