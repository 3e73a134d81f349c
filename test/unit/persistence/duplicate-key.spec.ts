import { describe, expect, it } from '@jest/globals';
import { clashedIndex, clashOn, isDuplicateKey } from '../../../lib/persistence/duplicate-key';
import { DEDUPE_SCOPE_INDEX } from '../../../lib/persistence/guarantee-indexes';

describe('reading duplicate-key errors', () => {
  it("MongoDB's keyPattern decides by field, whatever the index is called", () => {
    expect(clashOn({ code: 11000, keyPattern: { dedupeScope: 1 } }, DEDUPE_SCOPE_INDEX)).toBe('yes');
    expect(clashOn({ code: 11000, keyPattern: { orderId: 1 } }, DEDUPE_SCOPE_INDEX)).toBe('no');
  });

  it("MongoDB's message and DocumentDB's name the index", () => {
    const mongo = { errmsg: 'E11000 duplicate key error collection: d.jobs index: by_order dup key: { orderId: 1 }' };
    expect(clashedIndex(mongo)).toEqual({ name: 'by_order', fields: ['orderId'] });
    const documentDb = { errmsg: "Duplicate key violation on the requested collection: Index 'dedupe_scope'" };
    expect(clashedIndex(documentDb)).toEqual({ name: 'dedupe_scope', fields: undefined });
    expect(clashOn(documentDb, DEDUPE_SCOPE_INDEX)).toBe('yes');
    expect(
      clashOn({ errmsg: "Duplicate key violation on the requested collection: Index 'by_order'" }, DEDUPE_SCOPE_INDEX),
    ).toBe('no');
  });

  it('an error that names nothing is unknown, never taken for a guarantee index', () => {
    expect(clashOn({ code: 11000, errmsg: 'E11000 duplicate key error' }, DEDUPE_SCOPE_INDEX)).toBe('unknown');
    expect(clashOn({ code: 11000 }, DEDUPE_SCOPE_INDEX)).toBe('unknown');
  });

  it('only code 11000 is a duplicate key (FerretDB answers some clashes with code 1)', () => {
    expect(isDuplicateKey({ code: 11000 })).toBe(true);
    expect(isDuplicateKey({ code: 1, errmsg: 'duplicate key' })).toBe(false);
  });
});
