import type { JobExecution } from '../execution/job-execution.js';
import type { RowFate } from '../execution/row-fate.js';
import type { ExecutionOutcome } from '../model/execution-outcome.js';

/** One execution in a slot of the poll loop, from its start until its outcome is written (or left to its lease). */
export interface RunningExecution {
  execution: JobExecution;
  /** The handler has settled (or never started): only its outcome write may still be under way. */
  handlerSettled: boolean;
  /** What became of the row, once its outcome was handled (for the shutdown summary). */
  fate?: RowFate;
  done: Promise<ExecutionOutcome>;
}
