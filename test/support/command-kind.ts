import type { Document } from 'bson';

/**
 * What a command on the jobs collection does, for fault plans: `claim` takes a row (sets `lockedBy` with the status
 * `running`, or reclaims an expired one), `renewal` moves `lockedUntil` of an owned row (lease renewal, progress),
 * `outcome` writes any other status (completion, failure, release, cancel, retry), `enqueue` inserts, `read` finds,
 * aggregates or counts, `delete` deletes; `other` is everything else (indexes, hello, other collections).
 */
export type CommandKind = 'claim' | 'renewal' | 'outcome' | 'enqueue' | 'read' | 'delete' | 'other';

export const COMMAND_KINDS: readonly CommandKind[] = ['claim', 'renewal', 'outcome', 'enqueue', 'read', 'delete'];

const READS = new Set(['find', 'aggregate', 'count', 'distinct', 'getMore']);

/** Classifies one command by its name and its update documents (in the body or in a document sequence). */
export function classifyCommand(name: string, body: Document, sequences: Map<string, Document[]>): CommandKind {
  if (READS.has(name)) return 'read';
  if (name === 'insert') return 'enqueue';
  if (name === 'delete') return 'delete';
  if (name === 'findAndModify') return body.remove ? 'delete' : classifyUpdate(body.update);
  if (name === 'update') {
    const updates = (body.updates as Document[] | undefined) ?? sequences.get('updates') ?? [];
    return updates.length > 0 ? classifyUpdate(updates[0].u) : 'other';
  }
  return 'other';
}

function classifyUpdate(update: unknown): CommandKind {
  if (update === null || typeof update !== 'object') return 'other';
  // A pipeline update: its $set stages count as one $set.
  const stages: Document[] = Array.isArray(update) ? update : [update as Document];
  const set: Document = Object.assign({}, ...stages.map((stage) => stage.$set ?? {}));
  const lockedUntilMoved = 'lockedUntil' in set || 'lockedUntil' in (stages[0]?.$max ?? {});
  if (set.status === 'running' || (set.lockedBy !== undefined && 'attemptCount' in (stages[0]?.$inc ?? {}))) {
    return 'claim';
  }
  if (typeof set.status === 'string') return 'outcome';
  if (lockedUntilMoved) return 'renewal';
  return 'other';
}
