import { Injectable } from '@nestjs/common';
import type { Types } from 'mongoose';
import { type ClaimByIdResult, JobClaimService } from '../claim/job-claim.service.js';
import { PausedNames } from '../claim/paused-names.js';
import { JobHandlerRegistry } from '../handlers/job-handler.registry.js';
import { now } from '../model/clock.js';
import type { JobDocument } from '../model/job-document.js';
import { parseJobId } from '../model/job-id.js';
import type { RunNowConflictReason, RunNowOutcome } from '../model/jobs.types.js';
import { isInSource } from '../persistence/claim-queries.js';
import { toJobRecord } from '../persistence/job.schema.js';
import { JobReadStore } from '../persistence/job-read.store.js';
import { JobRunner } from './job-runner.service.js';

/** Claims of one `runNow` that miss a row which is takeable again right after (see `claimForRunNow`). */
const RUN_NOW_CLAIM_TRIES = 3;

/**
 * `JobsService.runNow` (where its contract is documented): claims exactly one job and runs it in one of this
 * process's slots, whatever `worker` and `runOnly` say.
 */
@Injectable()
export class RunNow {
  constructor(
    private readonly reads: JobReadStore,
    private readonly claims: JobClaimService,
    private readonly registry: JobHandlerRegistry,
    private readonly runner: JobRunner,
    private readonly paused: PausedNames,
  ) {}

  async run(id: string): Promise<RunNowOutcome> {
    const jobId = parseJobId(id);
    if (!jobId) return { kind: 'not_found' };
    // The fleet's pauses as of now (not as this process last read them): a paused name is not run, even by runNow.
    await this.paused.read();
    // A slot of `concurrency` is held before the claim: a busy process claims nothing (the row is untouched), and no
    // claim of the poll loop takes the slot meanwhile.
    const reservation = this.runner.reserveSlot();
    if (!reservation) return this.busy(jobId);
    try {
      const taken = await this.claimForRunNow(jobId);
      if (taken.kind === 'missed') return await this.conflict(jobId);
      if (taken.kind === 'limited') return await this.conflict(jobId, 'limit_reached');
      if (taken.kind === 'set_aside') return await this.setAside(jobId, taken.reason);
      const outcome = taken.kind === 'claimed' ? await this.runner.execute(taken.claim, reservation) : undefined;
      const after = await this.reads.findById(jobId);
      if (!after) return { kind: 'not_found' };
      if (outcome?.kind === 'not_started')
        return { kind: 'not_started', reason: outcome.reason, job: toJobRecord(after) };
      return { kind: taken.kind === 'claimed' ? 'executed' : 'dead_lettered', job: toJobRecord(after) };
    } finally {
      reservation.release();
    }
  }

  /**
   * `claimById`, tried again when it missed a row that a read right after shows takeable: the row changed state during
   * the claim (a claim of a poll loop handed back, say), and its answer would be a conflict it does not have.
   */
  private async claimForRunNow(jobId: Types.ObjectId): Promise<ClaimByIdResult> {
    for (let tries = 1; ; tries += 1) {
      const taken = await this.claims.claimById(jobId);
      if (taken.kind !== 'missed' || tries === RUN_NOW_CLAIM_TRIES) return taken;
      const doc = await this.reads.findById(jobId);
      if (!doc || !this.takeableNow(doc)) return taken;
    }
  }

  /** Every slot of this process is taken: `busy` for a job runNow could take now, else the reason it could not. */
  private async busy(jobId: Types.ObjectId): Promise<RunNowOutcome> {
    const doc = await this.reads.findById(jobId);
    if (!doc) return { kind: 'not_found' };
    const reason = this.takeableNow(doc) ? 'busy' : this.conflictReason(doc);
    return { kind: 'conflict', reason, job: toJobRecord(doc) };
  }

  /** A row `runNow` would take now: due, or running with its lease run out, and with a handler here. */
  private takeableNow(doc: JobDocument): boolean {
    const at = now();
    return (
      this.registry.get(doc.name) !== undefined &&
      !this.paused.has(doc.name) &&
      (isInSource(doc, 'pending', at) || isInSource(doc, 'running', at))
    );
  }

  /** The server refused to claim the row as stored; it is `failed` now, and no handler ran. */
  private async setAside(jobId: Types.ObjectId, reason: string): Promise<RunNowOutcome> {
    const doc = await this.reads.findById(jobId);
    return doc ? { kind: 'not_started', reason, job: toJobRecord(doc) } : { kind: 'not_found' };
  }

  private async conflict(jobId: Types.ObjectId, reason?: RunNowConflictReason): Promise<RunNowOutcome> {
    const doc = await this.reads.findById(jobId);
    if (!doc) return { kind: 'not_found' };
    return { kind: 'conflict', reason: reason ?? this.conflictReason(doc), job: toJobRecord(doc) };
  }

  private conflictReason(doc: JobDocument): RunNowConflictReason {
    if (doc.status !== 'pending' && doc.status !== 'running') return 'terminal';
    if (!this.registry.get(doc.name)) return 'no_handler';
    if (this.paused.has(doc.name)) return 'paused';
    if (doc.status === 'running') return 'locked';
    // Pending and due, yet every claim missed it: this process's poll loop kept taking it and handing it back, having
    // found every slot taken meanwhile. The process is at its concurrency, as `busy` says; `not_due` would be false.
    return doc.runAt instanceof Date && doc.runAt.getTime() <= now().getTime() ? 'busy' : 'not_due';
  }
}
