import { InvalidDurationError } from '../model/errors/invalid-duration.error.js';
import { InvalidOptionError } from '../model/errors/invalid-option.error.js';
import { MAX_JOB_NAME_LENGTH } from '../model/jobs.constants.js';
import { isDuration, nonEmptyString } from '../model/validate.js';

/** What `JobsService.drain` waits for. */
export interface DrainOptions {
  /** How long to wait, in ms above 0; jobs due later than this from now are not waited for. */
  timeoutMs: number;
  /**
   * The job names to wait for. A name no process handles is waited for too (its due jobs are what is left when the
   * drain gives up). @default the names this process runs (its handlers, or `runOnly`); required with `worker: false`
   */
  names?: string[];
}

const DRAIN_OPTION_KEYS: readonly string[] = ['timeoutMs', 'names'];

/** `drain`'s options, checked before anything is read; `names` is undefined when the caller left it to the default. */
export function resolveDrainOptions(options: DrainOptions): { timeoutMs: number; names: string[] | undefined } {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError('options', options, 'must be an object');
  }
  // A misspelt key (`name`) would otherwise be ignored, and the drain wait for other jobs than the caller meant.
  const unknown = Object.keys(options).find((key) => !DRAIN_OPTION_KEYS.includes(key));
  if (unknown !== undefined) {
    const given = (options as unknown as Record<string, unknown>)[unknown];
    throw new InvalidOptionError(unknown, given, `is not a drain option (${DRAIN_OPTION_KEYS.join(', ')})`);
  }
  const { timeoutMs, names } = options;
  // The rule (and error) of waitUntilFinished's timeoutMs.
  if (!isDuration(timeoutMs)) throw new InvalidDurationError('drain timeoutMs', timeoutMs);
  if (names === undefined) return { timeoutMs, names: undefined };
  if (!Array.isArray(names) || names.length === 0) {
    throw new InvalidOptionError('names', names, 'must be a non-empty array of job names');
  }
  const checked = names.map((name, index) => nonEmptyString(`names[${index}]`, name, MAX_JOB_NAME_LENGTH));
  return { timeoutMs, names: [...new Set(checked)] };
}
