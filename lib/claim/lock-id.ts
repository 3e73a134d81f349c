/**
 * Lock ids for executions: `workerId#n`. The worker id already carries a random part, so a counter makes them
 * unique across processes; they stay readable in `lockedBy`, and cost nothing per claim.
 */
export class LockIdSequence {
  private counter = 0;

  constructor(private readonly workerId: string) {}

  next(): string {
    this.counter += 1;
    return `${this.workerId}#${this.counter}`;
  }
}
