import { describe, expect, it } from '@jest/globals';
import { InvalidOptionError } from '../../../lib';
import { resolveJobHandler } from '../../../lib/handlers/job-handler-options.resolver';
import { resolveJobsOptions } from '../../../lib/jobs-options.resolver';
import { heartbeatIntervalFor } from '../../../lib/lease/lease-heartbeat.service';

describe('resolveJobsOptions', () => {
  it('derives heartbeatIntervalMs from leaseMs', () => {
    expect(resolveJobsOptions({ leaseMs: 9000 }).heartbeatIntervalMs).toBe(3000);
  });

  it('batches claims of up to 32 jobs by default; 1 turns batching off, 1,000 is the most', () => {
    expect(resolveJobsOptions({}).claimBatchSize).toBe(32);
    expect(resolveJobsOptions({ claimBatchSize: 1 }).claimBatchSize).toBe(1);
    expect(resolveJobsOptions({ claimBatchSize: 1_000 }).claimBatchSize).toBe(1_000);
  });

  it('sets the change stream safety net to 30 s, or pollIntervalMs when that is longer', () => {
    expect(resolveJobsOptions({}).changeStreamPollIntervalMs).toBe(30_000);
    expect(resolveJobsOptions({ pollIntervalMs: 60_000 }).changeStreamPollIntervalMs).toBe(60_000);
    expect(resolveJobsOptions({ pollIntervalMs: 50, changeStreamPollIntervalMs: 50 }).changeStreamPollIntervalMs).toBe(
      50,
    );
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
    [{ claimBatchSize: 0 }, 'claimBatchSize'],
    [{ claimBatchSize: 2.5 }, 'claimBatchSize'],
    [{ claimBatchSize: 1_001 }, 'claimBatchSize'],
    [{ claimBatchSize: Number.NaN }, 'claimBatchSize'],
    [{ claimBatchSize: '8' as unknown as number }, 'claimBatchSize'],
    [{ changeStreamPollIntervalMs: 0 }, 'changeStreamPollIntervalMs'],
    [{ changeStream: 'off' as unknown as boolean }, 'changeStream'],
    [{ changeStreamPollIntervalMs: '30000' as unknown as number }, 'changeStreamPollIntervalMs'],
    [{ pollIntervalMs: 5_000, changeStreamPollIntervalMs: 1_000 }, 'changeStreamPollIntervalMs'],
    [{ telemetry: true as unknown as false }, 'telemetry'],
    [{ telemetry: { metricsIntervalMs: 0 } }, 'telemetry.metricsIntervalMs'],
    [{ telemetry: { extraJobNames: 'email.send' as unknown as string[] } }, 'telemetry.extraJobNames'],
    [{ telemetry: { extraJobNames: ['email.send', ''] } }, 'telemetry.extraJobNames[1]'],
    [{ telemetry: { extraJobNames: ['x'.repeat(201)] } }, 'telemetry.extraJobNames[0]'],
    [{ telemetry: { extraJobNames: ['_other'] } }, 'telemetry.extraJobNames[0]'],
    [{ telemetry: { extraJobName: ['email.send'] } as never }, 'telemetry.extraJobName'],
  ])('rejects %j naming %s', (options, option) => {
    expect(() => resolveJobsOptions(options)).toThrow(InvalidOptionError);
    expect(() => resolveJobsOptions(options)).toThrow(`Invalid option ${option}`);
  });

  it('turns telemetry on with a 15 s metrics interval and no extra job names by default, off with false', () => {
    expect(resolveJobsOptions({}).telemetry).toEqual({ metricsIntervalMs: 15_000, extraJobNames: [] });
    expect(resolveJobsOptions({ telemetry: { metricsIntervalMs: 500 } }).telemetry).toEqual({
      metricsIntervalMs: 500,
      extraJobNames: [],
    });
    const tooMany = Array.from({ length: 1_001 }, (_, i) => `n${i}`);
    expect(() => resolveJobsOptions({ telemetry: { extraJobNames: tooMany } })).toThrow(
      'Invalid option telemetry.extraJobNames: must be an array of at most 1000 job names',
    );
    expect(resolveJobsOptions({ telemetry: { extraJobNames: ['a', 'b', 'a'] } }).telemetry).toEqual({
      metricsIntervalMs: 15_000,
      extraJobNames: ['a', 'b'],
    });
    expect(resolveJobsOptions({ telemetry: false }).telemetry).toBe(false);
  });

  it.each([
    [{ names: ['email.welcome'] }, 'runOnly', 'got an object with key "names"'],
    [new Set(['email.welcome']), 'runOnly', 'got a Set of 1 item'],
    [[], 'runOnly', 'got an empty array'],
    [[['email.welcome', 'report.build']], 'runOnly[0]', 'got an array of 2 items'],
    [[{ name: 'email.welcome' }], 'runOnly[0]', 'got an object with key "name"'],
  ])('says what a misused runOnly (%p) was and what it takes', (runOnly, option, got) => {
    let message = '';
    try {
      resolveJobsOptions({ runOnly: runOnly as unknown as string[] });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain(`Invalid option ${option}: `);
    expect(message).toContain("must be a flat array of job names, such as ['email.welcome', 'report.build']");
    expect(message).toContain(got);
    expect(message).not.toContain('[object ');
  });

  it('keeps runOnly without duplicates, and leaves it unset by default (every handled name)', () => {
    expect(resolveJobsOptions({ runOnly: ['heavy', 'heavy', 'video'] }).runOnly).toEqual(['heavy', 'video']);
    expect(resolveJobsOptions({}).runOnly).toBeUndefined();
  });
});

describe('retention options', () => {
  const DAY_MS = 86_400_000;

  it('keeps completed jobs 7 days and the other finished ones 30, sweeping every minute, by default', () => {
    expect(resolveJobsOptions({}).retention).toEqual({
      periods: { completed: 7 * DAY_MS, dead: 30 * DAY_MS, failed: 30 * DAY_MS, cancelled: 30 * DAY_MS },
      sweepIntervalMs: 60_000,
    });
  });

  it('merges given periods over the defaults; false keeps every finished job', () => {
    expect(resolveJobsOptions({ retention: { completed: 200, sweepIntervalMs: 100 } }).retention).toEqual({
      periods: { completed: 200, dead: 30 * DAY_MS, failed: 30 * DAY_MS, cancelled: 30 * DAY_MS },
      sweepIntervalMs: 100,
    });
    expect(resolveJobsOptions({ retention: false }).retention.periods).toEqual({
      completed: null,
      dead: null,
      failed: null,
      cancelled: null,
    });
  });

  it.each([
    [{ retention: true as unknown as false }, 'retention'],
    [{ retention: { completed: 0 } }, 'retention.completed'],
    [{ retention: { dead: -1 } }, 'retention.dead'],
    [{ retention: { failed: Number.NaN } }, 'retention.failed'],
    [{ retention: { cancelled: '1d' as unknown as number } }, 'retention.cancelled'],
    [{ retention: { sweepIntervalMs: 2 ** 31 } }, 'retention.sweepIntervalMs'],
    [{ retention: { complete: 5 } as never }, 'retention.complete'],
  ])('rejects %j naming %s', (options, option) => {
    expect(() => resolveJobsOptions(options)).toThrow(InvalidOptionError);
    expect(() => resolveJobsOptions(options)).toThrow(`Invalid option ${option}`);
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

describe("a handler's retention against the module's", () => {
  const resolve = (retention: unknown, moduleOptions = resolveJobsOptions({ retention: { completed: 1_000 } })) =>
    resolveJobHandler({ name: 'x', options: { retention } as never }, () => undefined, 'X.x', moduleOptions).retention;

  it("follows the module's when unset, and overrides it status by status when given", () => {
    expect(resolve(undefined)).toBeUndefined();
    expect(resolve({ dead: 5 })).toEqual({
      completed: 1_000,
      dead: 5,
      failed: 2_592_000_000,
      cancelled: 2_592_000_000,
    });
    expect(resolve(false)).toEqual({ completed: null, dead: null, failed: null, cancelled: null });
    expect(resolve({ completed: 5 }, resolveJobsOptions({ retention: false }))).toEqual({
      completed: 5,
      dead: null,
      failed: null,
      cancelled: null,
    });
  });

  it.each([[{ completed: 0 }], [{ sweepIntervalMs: 5 }], [true]])('rejects %j naming the handler', (retention) => {
    expect(() => resolve(retention)).toThrow("Invalid option @JobHandler('x').retention");
  });
});
