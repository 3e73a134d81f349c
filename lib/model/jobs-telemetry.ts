import type { ClaimedRow } from './claimed-job.js';
import type { ExecutionOutcome } from './execution-outcome.js';
import type { NewJobDocument } from './new-job-document.js';

/** Injection token of this module's `JobsTelemetry`, or null when telemetry is off or the API is not installed. */
export const JOBS_TELEMETRY = Symbol('JOBS_TELEMETRY');

/**
 * What the core reports to OpenTelemetry. Callers hold `JobsTelemetry | null` and check for null first: with
 * telemetry off (or `@opentelemetry/api` absent) that check is all the hot path pays.
 */
export interface JobsTelemetry {
  /**
   * Runs `send` (the insert of `docs`) inside a PRODUCER span, after storing that span's propagated context on
   * every doc (`traceContext`); counts the messages sent: the docs `stored` says were stored (by index in `docs`).
   */
  traceSend<T>(
    docs: readonly NewJobDocument[],
    send: () => Promise<T>,
    stored: (result: T, index: number) => boolean,
  ): Promise<T>;
  /** Opens the CONSUMER span of one attempt (parent and link: the stored producer context); counts the delivery. */
  startAttempt(doc: ClaimedRow, jobId: string, attempt: number): AttemptTelemetry;
  leaseRenewed(name: string): void;
  leaseLost(name: string): void;
}

/** One attempt's span and measurements. */
export interface AttemptTelemetry {
  /** Runs the attempt inside the span's context (the handler's own spans nest under it), then ends the span. */
  run(attempt: () => Promise<ExecutionOutcome>): Promise<ExecutionOutcome>;
  /** The execution was asked to stop (timeout, cancellation, lease loss, shutdown): an event with the reason. */
  aborted(reason: Error): void;
}
