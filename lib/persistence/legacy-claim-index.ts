import type { IndexInfo } from './guarantee-indexes.js';

/** The claim index of older versions, replaced by `claim_by_name` (which also serves the per-name filter). */
const LEGACY_CLAIM_INDEX = { name: 'claim', key: { status: 1, priority: -1, runAt: 1, _id: 1 } } as const;

/**
 * Whether `index` is exactly the claim index older versions created: that name, those keys in that order, and no
 * option that would make it something a user relies on (unique, sparse, partial, collation).
 */
export function isLegacyClaimIndex(index: IndexInfo): boolean {
  if (index.name !== LEGACY_CLAIM_INDEX.name) return false;
  const expected = Object.entries(LEGACY_CLAIM_INDEX.key);
  const actual = Object.entries(index.key);
  const sameKeys =
    actual.length === expected.length &&
    actual.every(([field, direction], i) => field === expected[i][0] && direction === expected[i][1]);
  return (
    sameKeys &&
    index.unique !== true &&
    index.sparse !== true &&
    index.partialFilterExpression === undefined &&
    index.collation === undefined
  );
}
