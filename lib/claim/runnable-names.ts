import type { JobHandlerRegistry } from '../handlers/job-handler.registry.js';
import { InvalidOptionError } from '../model/errors/invalid-option.error.js';

/**
 * The names a poll loop claims: every name with a handler here, or `runOnly`.
 * @throws InvalidOptionError when a `runOnly` entry has no handler in this process
 */
export function runnableNames(runOnly: string[] | undefined, registry: JobHandlerRegistry): string[] {
  const unhandled = runOnly?.filter((name) => !registry.get(name)) ?? [];
  if (unhandled.length > 0) {
    const names = unhandled.map((name) => JSON.stringify(name)).join(', ');
    throw new InvalidOptionError('runOnly', runOnly, `names ${names} with no @JobHandler in this process`);
  }
  return runOnly ?? registry.names();
}
