/**
 * Per job name, how much of its per-process `concurrency` is taken: by its executions running here, and by the claims
 * in flight that may return a job of it. The poll loop leaves a name out of its claims once these together reach the
 * limit, so that claims in flight never take more of a name than its limit allows.
 */
export class NameCapacity {
  private readonly running = new Map<string, number>();
  private readonly claiming = new Map<string, number>();

  /** `limitOf`: the name's per-process concurrency (infinite for a name with no handler here). */
  constructor(private readonly limitOf: (name: string) => number) {}

  /** Executions of `name` running here now. */
  runningOf(name: string): number {
    return this.running.get(name) ?? 0;
  }

  /** An execution of `name` started (+1) or ended (-1). */
  adjustRunning(name: string, delta: 1 | -1): void {
    addCount(this.running, name, delta);
  }

  /**
   * A claim that may return a job of any of `names` was sent (+1) or answered (-1); a batch claim of n jobs counts n
   * against each of the names it asks for.
   */
  adjustClaiming(names: readonly string[], delta: number): void {
    for (const name of names) addCount(this.claiming, name, delta);
  }

  /** How many more executions of `name` may start here: its limit minus those running and the claims in flight. */
  roomOf(name: string): number {
    return this.limitOf(name) - this.runningOf(name) - (this.claiming.get(name) ?? 0);
  }

  /** Names with no free capacity left: their running executions plus the claims in flight that may return them. */
  saturated(): string[] {
    const names: string[] = [];
    for (const [name, count] of this.running) {
      if (count + (this.claiming.get(name) ?? 0) >= this.limitOf(name)) names.push(name);
    }
    for (const [name, count] of this.claiming) {
      if (!this.running.has(name) && count >= this.limitOf(name)) names.push(name);
    }
    return names;
  }
}

function addCount(counts: Map<string, number>, name: string, delta: number): void {
  const count = (counts.get(name) ?? 0) + delta;
  if (count > 0) counts.set(name, count);
  else counts.delete(name);
}
