import type { GuaranteeIndex, IndexProblem } from '../model/errors/guarantee-index.js';

/** An index as `listIndexes` describes it (only the parts that decide what it enforces). */
export interface IndexInfo {
  name: string;
  key: Record<string, unknown>;
  unique?: boolean;
  sparse?: boolean;
  partialFilterExpression?: unknown;
  collation?: unknown;
}

export const DEDUPE_SCOPE_INDEX: GuaranteeIndex = {
  name: 'dedupe_scope',
  field: 'dedupeScope',
  guards: 'one pending or running job per job name and dedupeKey',
};

export const SCHEDULE_INDEX: GuaranteeIndex = {
  name: 'schedule',
  field: 'scheduleKey',
  guards: 'one job per cron tick',
};

export const THROTTLE_SCOPE_INDEX: GuaranteeIndex = {
  name: 'throttle_scope',
  field: 'throttleScope',
  guards: 'one job per job name, throttle key and window',
};

export const DEBOUNCE_SCOPE_INDEX: GuaranteeIndex = {
  name: 'debounce_scope',
  field: 'debounceScope',
  guards: 'one pending job per job name and debounce key',
};

export const CONCURRENCY_SLOT_INDEX: GuaranteeIndex = {
  name: 'concurrency_slot',
  field: 'concurrencySlot',
  guards: "a name's globalConcurrency across the fleet",
};

export const GROUP_SLOT_INDEX: GuaranteeIndex = {
  name: 'group_slot',
  field: 'groupSlot',
  guards: "a name's groupConcurrency across the fleet",
};

export const GUARANTEE_INDEXES: readonly GuaranteeIndex[] = [
  DEDUPE_SCOPE_INDEX,
  SCHEDULE_INDEX,
  THROTTLE_SCOPE_INDEX,
  DEBOUNCE_SCOPE_INDEX,
  CONCURRENCY_SLOT_INDEX,
  GROUP_SLOT_INDEX,
];

/** The global unique index on `dedupeKey` of versions before dedupe keys were scoped by job name. */
const LEGACY_DEDUPE_INDEX = { name: 'dedupe', field: 'dedupeKey' };

/**
 * Checks the listed indexes for one guarantee: every index with its name or its key must be exactly unique + sparse
 * on `{ field: 1 }` (a second, weaker index on the same key cannot coexist on a real server: it is what stopped ours
 * from being created), and at least one must exist. Returns undefined when the guarantee is enforced.
 */
export function guaranteeIndexProblem(
  guarantee: GuaranteeIndex,
  indexes: readonly IndexInfo[],
): IndexProblem | undefined {
  const key = { [guarantee.field]: 1 };
  const relevant = indexes.filter((index) => index.name === guarantee.name || sameKey(index.key, key));
  for (const index of relevant) {
    const problem = whyNotUniqueSparseOn(index, key);
    if (problem) return { conflictingIndex: index.name, problem };
  }
  return relevant.length > 0 ? undefined : { conflictingIndex: null, problem: 'is missing' };
}

/** True only for the old global dedupe index exactly as old versions created it (never a user's own index). */
export function isLegacyDedupeIndex(index: IndexInfo): boolean {
  return (
    index.name === LEGACY_DEDUPE_INDEX.name &&
    whyNotUniqueSparseOn(index, { [LEGACY_DEDUPE_INDEX.field]: 1 }) === undefined
  );
}

function whyNotUniqueSparseOn(index: IndexInfo, key: Record<string, number>): string | undefined {
  if (!sameKey(index.key, key)) return `has key ${JSON.stringify(index.key)} instead of ${JSON.stringify(key)}`;
  if (index.unique !== true) return 'is not unique';
  if (index.sparse !== true) return 'is not sparse (every job without the field would collide on null)';
  if (index.partialFilterExpression !== undefined) return 'is partial (it enforces uniqueness on some rows only)';
  if (index.collation !== undefined) return 'has a collation (it compares keys differently)';
  return undefined;
}

function sameKey(actual: Record<string, unknown>, expected: Record<string, number>): boolean {
  const fields = Object.keys(actual);
  return fields.length === Object.keys(expected).length && fields.every((field) => actual[field] === expected[field]);
}
