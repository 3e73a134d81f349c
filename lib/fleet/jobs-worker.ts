/**
 * One live worker process of the fleet (every process with `worker: true` on the collection), as its last presence
 * refresh described it. Never carries payloads.
 */
export interface JobsWorker {
  /** The process's `workerId` option (the prefix of its jobs' `lockedBy`). */
  workerId: string;
  host: string;
  pid: number;
  /** When the process's worker started. */
  startedAt: Date;
  /** Its last presence refresh (its own clock). */
  lastSeenAt: Date;
  concurrency: number;
  /**
   * Job names its poll loop claims (`runOnly`, or every name with a handler there), sorted; a name with fleet-wide
   * limits is listed while it is at its limit too.
   */
  names: string[];
  /**
   * Names of `names` it saw paused at `lastSeenAt` (`JobsService.pause`), sorted: it claims none of them. Absent for a
   * worker of a version before pauses existed, which ignores them (during a rolling deploy, such a worker may still
   * run a paused name), and for a worker that has not read the pauses yet (it claims nothing until it has).
   */
  paused?: string[];
  /** Jobs it was running at `lastSeenAt`. */
  running: number;
  /** Version of nestjs-mongo-jobs it runs. */
  version: string;
}
