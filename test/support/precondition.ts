/**
 * Chaos and lease tests stage a situation (a worker killed while it holds a job, a stall that catches a live lease, a
 * claim answered late) and then check what the library did about it. On a loaded machine the situation may simply not
 * happen: the victim finished its job before the kill, the lease ran out before the stall. Such a run proved nothing,
 * so it must neither pass nor count as a failure of the library: the scenario is run again, from scratch.
 *
 * A scenario that cannot reach its precondition in a few tries is badly designed (it depends on timing the machine
 * does not give); the helper fails it loudly instead of retrying for ever.
 */

/** The most runs of one scenario. */
export const MAX_SCENARIO_ATTEMPTS = 3;

/** What one run of a scenario reports: its precondition happened (with the run's result), or did not (and why). */
export type ScenarioRun<T> = { reached: true; value: T } | { reached: false; detail: string };

/** The precondition happened: the run exercised the guarantee; `value` goes to the test. */
export function reached<T>(value: T): ScenarioRun<T>;
export function reached(): ScenarioRun<void>;
export function reached<T>(value?: T): ScenarioRun<T | undefined> {
  return { reached: true, value };
}

/** The precondition did not happen in this run; `detail` says what was seen instead (it ends up in the failure). */
export function notReached(detail: string): ScenarioRun<never> {
  return { reached: false, detail };
}

/** Thrown when no run reached the precondition; its message starts `precondition not reached: <what>`. */
export class PreconditionNotReachedError extends Error {
  override name = 'PreconditionNotReachedError';

  constructor(
    readonly precondition: string,
    readonly details: string[],
  ) {
    super(
      `precondition not reached: ${precondition} (${details.length} attempts: ${details
        .map((detail, i) => `${i + 1}. ${detail}`)
        .join('; ')})`,
    );
  }
}

export interface PreconditionOptions {
  /** The most runs. @default MAX_SCENARIO_ATTEMPTS */
  maxAttempts?: number;
  /** Where each missed attempt is reported. @default a line on stderr */
  log?: (line: string) => void;
}

/**
 * Runs `scenario` until a run reports its precondition `reached`, at most `maxAttempts` times, and resolves that run's
 * value. Each run must set up its own state (fresh database, fresh workers): nothing of a run that missed its
 * precondition may leak into the next. A run that throws (an assertion failed, a timeout) fails the test at once:
 * only a missed precondition is retried. After `maxAttempts` missed runs, rejects with a
 * {@link PreconditionNotReachedError} naming `precondition` and what each run saw.
 */
export async function untilPreconditionReached<T>(
  precondition: string,
  scenario: (attempt: number) => Promise<ScenarioRun<T>>,
  { maxAttempts = MAX_SCENARIO_ATTEMPTS, log = (line) => process.stderr.write(`${line}\n`) }: PreconditionOptions = {},
): Promise<T> {
  const details: string[] = [];
  for (let attempt = 1; attempt <= maxAttempts; attempt += 1) {
    const run = await scenario(attempt);
    if (run.reached) return run.value;
    details.push(run.detail);
    // Visible in the run's output: a scenario that often needs a second try is one to redesign.
    log(`precondition not reached (${precondition}), attempt ${attempt} of ${maxAttempts}: ${run.detail}`);
  }
  throw new PreconditionNotReachedError(precondition, details);
}
