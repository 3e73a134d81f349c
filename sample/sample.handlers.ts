import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable, Logger } from '@nestjs/common';
import { type JobExecutionContext, JobHandler } from '../lib';

/** The sample's job handlers: plain provider methods, with dependency injection as usual. */
@Injectable()
export class SampleHandlers {
  private readonly logger = new Logger('SampleHandlers');
  private readonly flakyFailures = new Map<string, number>();

  /** A quick job. */
  @JobHandler('hello')
  hello(payload: { name?: string }, ctx: JobExecutionContext) {
    this.logger.log(`Hello, ${payload?.name ?? 'world'}! (job ${ctx.jobId}, attempt ${ctx.attempt})`);
  }

  /** A long job that reports progress and asks for more lease time as it goes. */
  @JobHandler('long-report', { leaseMs: 60_000, timeoutMs: 120_000 })
  async longReport(payload: { steps?: number }, ctx: JobExecutionContext) {
    const steps = Math.min(Math.max(Number(payload?.steps) || 5, 1), 50);
    for (let step = 1; step <= steps; step += 1) {
      // Stopping by throwing the abort reason: the attempt then ends by that reason's rule (released on shutdown).
      ctx.signal.throwIfAborted();
      // An abort-aware pause: it rejects with an AbortError as soon as the signal aborts (a shutdown does not wait out
      // the step), and removes its abort listener when it ends, so the steps do not pile listeners up on the signal.
      await sleep(500, undefined, { signal: ctx.signal });
      await ctx.extendLockTime(60_000);
      this.logger.log(
        `long-report ${ctx.jobId}: step ${step}/${steps}, lease until ${ctx.leaseExpiresAt.toISOString()}`,
      );
    }
  }

  /** Every minute, on whichever instance gets the tick first: one job per tick however many instances run. */
  @JobHandler('minutely-report', { cron: '0 * * * * *', timeZone: 'Europe/Berlin' })
  minutelyReport(payload: { scheduledFor: string }) {
    this.logger.log(`minutely-report for ${payload.scheduledFor}`);
  }

  /** Fails twice, then succeeds: watch attempts and backoff in GET /jobs/:id. */
  @JobHandler('flaky', { maxAttempts: 5, backoff: { baseMs: 500, maxMs: 5_000 } })
  flaky(_payload: unknown, ctx: JobExecutionContext) {
    const failures = this.flakyFailures.get(ctx.jobId) ?? 0;
    if (failures < 2) {
      this.flakyFailures.set(ctx.jobId, failures + 1);
      throw new Error(`flaky failure ${failures + 1}`);
    }
    this.logger.log(`flaky ${ctx.jobId} succeeded on attempt ${ctx.attempt}`);
  }
}
