import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

/** `host:pid:random`: unique per process, readable in `lockedBy` when debugging who holds a job. */
export function defaultWorkerId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
}
