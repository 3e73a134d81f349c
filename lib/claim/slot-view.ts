import type { FleetLimits } from '../handlers/fleet-limits.js';
import type { SlotHolder } from '../persistence/claim-queries.js';
import { concurrencySlotKey, concurrencySlotKeys, groupSlotKey, parseGroupSlotKey } from './slot-keys.js';

/**
 * What one read of a limited name's slot holders says, at `now`:
 * - a slot is *ended* when its holder left `running` and its last lease ran out (freed with `freeEndedSlots`);
 * - a running holder whose lease ran out is *expired*: it is reclaimed with its slots, never freed;
 * - every other holder is live, and its slot is taken.
 * Pure: the claim's decisions are unit-tested without a database.
 */
export class SlotView {
  /** Holders of ended slots, by field: their slots are free once `freeEndedSlots` has unset them. */
  readonly endedConcurrencySlots: string[] = [];
  readonly endedGroupSlots: string[] = [];
  /** Running holders whose lease ran out: reclaim these first. */
  readonly expired: SlotHolder[] = [];
  private readonly takenConcurrency = new Set<string>();
  /** Per group, the slot indexes taken. */
  private readonly takenInGroup = new Map<string, Set<number>>();

  constructor(
    private readonly name: string,
    private readonly limits: FleetLimits,
    holders: readonly SlotHolder[],
    now: Date,
  ) {
    for (const holder of holders) {
      const running = holder.status === 'running';
      const leaseAhead = holder.lockedUntil !== undefined && holder.lockedUntil > now;
      if (!running && !leaseAhead) {
        if (holder.concurrencySlot !== undefined) this.endedConcurrencySlots.push(holder.concurrencySlot);
        if (holder.groupSlot !== undefined) this.endedGroupSlots.push(holder.groupSlot);
        continue;
      }
      if (running && !leaseAhead) this.expired.push(holder);
      if (holder.concurrencySlot !== undefined) this.takenConcurrency.add(holder.concurrencySlot);
      if (holder.groupSlot !== undefined) {
        const { group, index } = parseGroupSlotKey(holder.groupSlot);
        const taken = this.takenInGroup.get(group) ?? new Set<number>();
        taken.add(index);
        this.takenInGroup.set(group, taken);
      }
    }
  }

  /**
   * A `globalConcurrency` slot no live or expired holder has (ended ones count as free: the claim frees them first),
   * starting at a random one so that claimers racing for the last slots spread out; undefined with no such limit,
   * null when every slot is taken.
   */
  freeConcurrencySlot(): string | null | undefined {
    const limit = this.limits.globalConcurrency;
    if (limit === undefined) return undefined;
    // A few random draws find a free slot at once unless most are taken; then the free ones are listed.
    for (let draw = 0; draw < 4; draw += 1) {
      const key = concurrencySlotKey(this.name, Math.floor(Math.random() * limit));
      if (!this.takenConcurrency.has(key)) return key;
    }
    const keys = concurrencySlotKeys(this.name, limit).filter((key) => !this.takenConcurrency.has(key));
    return keys.length === 0 ? null : keys[Math.floor(Math.random() * keys.length)];
  }

  /** Groups with every one of their `groupConcurrency` slots taken: a claim skips their rows. */
  fullGroups(): string[] {
    const limit = this.limits.groupConcurrency;
    if (limit === undefined) return [];
    const full: string[] = [];
    for (const [group, taken] of this.takenInGroup) {
      if (countBelow(taken, limit) >= limit) full.push(group);
    }
    return full;
  }

  /**
   * A free slot of `group`, at random among the free ones like `freeConcurrencySlot` (null when full); undefined with
   * no group limit, or when `group` is not a group (absent, null, or a malformed value stored by another tool).
   */
  freeGroupSlot(group: unknown): string | null | undefined {
    const limit = this.limits.groupConcurrency;
    if (limit === undefined || typeof group !== 'string' || group === '') return undefined;
    const taken = this.takenInGroup.get(group);
    for (let draw = 0; draw < 4; draw += 1) {
      const index = Math.floor(Math.random() * limit);
      if (!taken?.has(index)) return groupSlotKey(this.name, group, index);
    }
    const free = Array.from({ length: limit }, (_, index) => index).filter((index) => !taken?.has(index));
    return free.length === 0 ? null : groupSlotKey(this.name, group, free[Math.floor(Math.random() * free.length)]);
  }
}

/** Taken slot indexes below the limit (a lowered limit leaves higher ones held until their rows end). */
function countBelow(taken: ReadonlySet<number>, limit: number): number {
  let count = 0;
  for (const index of taken) if (index < limit) count += 1;
  return count;
}
