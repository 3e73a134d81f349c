import type { Types } from 'mongoose';

/**
 * Ids of rows this process must stop trying to claim: the server refuses to update them and refused to mark them
 * `failed` too. Bounded, oldest forgotten first, so a flood of such rows cannot grow memory or the claim filter.
 */
export class SetAsideIds {
  private readonly ids = new Map<string, Types.ObjectId>();
  /** `values()` is read on every claim and changes only on `add`: built once per change. */
  private snapshot: Types.ObjectId[] = [];

  constructor(private readonly capacity: number) {}

  add(id: Types.ObjectId): void {
    const key = id.toHexString();
    this.ids.delete(key);
    this.ids.set(key, id);
    if (this.ids.size > this.capacity) {
      const oldest = this.ids.keys().next().value;
      if (oldest !== undefined) this.ids.delete(oldest);
    }
    this.snapshot = [...this.ids.values()];
  }

  has(id: Types.ObjectId): boolean {
    return this.ids.has(id.toHexString());
  }

  /** The remembered ids, oldest first. The same array until the next `add`: callers must not change it. */
  values(): readonly Types.ObjectId[] {
    return this.snapshot;
  }
}
