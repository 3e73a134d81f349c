import { describe, expect, it } from '@jest/globals';
import {
  DEDUPE_SCOPE_INDEX,
  guaranteeIndexProblem,
  type IndexInfo,
  isLegacyDedupeIndex,
} from '../../../lib/persistence/guarantee-indexes';

const ID: IndexInfo = { name: '_id_', key: { _id: 1 } };
const GOOD: IndexInfo = { name: 'dedupe_scope', key: { dedupeScope: 1 }, unique: true, sparse: true };

describe('guaranteeIndexProblem', () => {
  it('accepts exactly the unique sparse index, also under another name', () => {
    expect(guaranteeIndexProblem(DEDUPE_SCOPE_INDEX, [ID, GOOD])).toBeUndefined();
    expect(guaranteeIndexProblem(DEDUPE_SCOPE_INDEX, [ID, { ...GOOD, name: 'mine' }])).toBeUndefined();
  });

  it('reports a missing index', () => {
    expect(guaranteeIndexProblem(DEDUPE_SCOPE_INDEX, [ID])).toEqual({ conflictingIndex: null, problem: 'is missing' });
  });

  it.each<[string, IndexInfo, RegExp]>([
    ['not unique', { ...GOOD, unique: undefined }, /not unique/],
    ['not sparse', { ...GOOD, sparse: false }, /not sparse/],
    ['partial', { ...GOOD, partialFilterExpression: { status: 'pending' } }, /partial/],
    ['collated', { ...GOOD, collation: { locale: 'en', strength: 2 } }, /collation/],
    ['on another key', { ...GOOD, key: { dedupeScope: 1, name: 1 } }, /has key/],
    ['descending', { ...GOOD, key: { dedupeScope: -1 } }, /has key/],
  ])('names an index under the guarantee name that is %s', (_, index, problem) => {
    expect(guaranteeIndexProblem(DEDUPE_SCOPE_INDEX, [ID, index])).toEqual({
      conflictingIndex: 'dedupe_scope',
      problem: expect.stringMatching(problem),
    });
  });

  it('names a weaker index on the same key even when the right one exists too', () => {
    const weak = { name: 'by_scope', key: { dedupeScope: 1 } };
    expect(guaranteeIndexProblem(DEDUPE_SCOPE_INDEX, [GOOD, weak])).toMatchObject({ conflictingIndex: 'by_scope' });
  });
});

describe('isLegacyDedupeIndex', () => {
  const legacy: IndexInfo = { name: 'dedupe', key: { dedupeKey: 1 }, unique: true, sparse: true };

  it('matches only the old index exactly as old versions created it', () => {
    expect(isLegacyDedupeIndex(legacy)).toBe(true);
    expect(isLegacyDedupeIndex({ ...legacy, unique: false })).toBe(false);
    expect(isLegacyDedupeIndex({ ...legacy, key: { dedupeKey: 1, name: 1 } })).toBe(false);
    expect(isLegacyDedupeIndex({ ...legacy, partialFilterExpression: { a: 1 } })).toBe(false);
    expect(isLegacyDedupeIndex({ ...legacy, name: 'dedupe_by_key' })).toBe(false);
  });
});
