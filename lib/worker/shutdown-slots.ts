import type { Logger } from '@nestjs/common';
import type { RowFate } from '../execution/row-fate.js';
import { WorkerShutdownError } from '../model/errors/worker-shutdown.error.js';
import { SHUTDOWN_SETTLE_MS } from '../model/jobs.constants.js';
import type { ShutdownDeadline } from '../model/shutdown-deadline.js';
import type { RunningExecution } from './running-execution.js';

/** The poll loop as its shutdown sees it, once it stopped claiming (no job starts after this point). */
export interface StoppedPollLoop {
  /** Settles once the loop ended and its claims in flight were answered; undefined when it never ran. */
  readonly loop: Promise<void> | undefined;
  /** The executions in its slots now: each leaves once its outcome is handled. */
  running(): RunningExecution[];
}

/**
 * Empties the slots of a poll loop that stopped claiming, by the module's shared shutdown deadline whatever the
 * database does: running handlers may finish until the grace end, the rest are aborted and given the settle window,
 * outcome writes may land until the hard bound, and a handler that ignores its abort is left to its lease (renewals
 * stop). Resolves what became of the row of each job running when it began.
 */
export async function shutDownSlots(
  worker: StoppedPollLoop,
  deadline: ShutdownDeadline,
  logger: Logger,
): Promise<{ jobId: string; fate: RowFate }[]> {
  const jobs = worker.running();
  const dones = (filter: (entry: RunningExecution) => boolean = () => true) =>
    Promise.all(
      worker
        .running()
        .filter(filter)
        .map((entry) => entry.done),
    );
  // Measured from the module's first shutdown hook, not from this one: hooks before it count against the bound.
  deadline.start();
  const graceEnd = deadline.graceEndsAt as number;
  // Claims in flight do not hold up the handlers' grace; they are waited for again below, up to the hard bound.
  await deadline.settledBy(worker.loop, graceEnd);
  await deadline.settledBy(dones(), graceEnd);
  for (const entry of worker.running()) entry.execution.abort(new WorkerShutdownError(entry.execution.jobId));
  await deadline.settledBy(dones(), Date.now() + SHUTDOWN_SETTLE_MS);
  await deadline.settledBy(dones((entry) => entry.handlerSettled));
  // A claim whose answer is late (or in doubt, being read back) would otherwise leave its row `running` for nobody
  // until the lease runs out, then count a lost attempt: wait for it up to the hard bound; it hands its row back.
  await deadline.settledBy(worker.loop);
  for (const entry of worker.running()) {
    if (entry.handlerSettled) continue;
    const { execution } = entry;
    const { lease } = execution;
    logger.warn(
      `Job ${execution.jobId} (${execution.claim.doc.name}) ignored the shutdown abort; its row stays owned until ` +
        `its lease runs out (${lease.expiresAt.toISOString()}) and is then taken over by another worker`,
    );
    lease.stopRenewing();
  }
  // A handler still running, or an outcome write that had not landed by the deadline: the row is left to its lease.
  return jobs.map((entry) => ({
    jobId: entry.execution.jobId,
    fate: (entry.handlerSettled && entry.fate) || ('left' as const),
  }));
}
