import { randomBytes } from 'node:crypto';

/** Lock ids for executions: `workerId#n.random`, unique across processes and readable in `lockedBy`. */
export class LockIdSequence {
  private counter = 0;

  constructor(private readonly workerId: string) {}

  next(): string {
    this.counter += 1;
    return `${this.workerId}#${this.counter}.${randomBytes(2).toString('hex')}`;
  }
}
