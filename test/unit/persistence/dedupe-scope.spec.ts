import { describe, expect, it } from '@jest/globals';
import { dedupeScope } from '../../../lib/persistence/dedupe-scope';

describe('dedupeScope', () => {
  it('differs per job name and cannot be forged by separator characters in name or key', () => {
    expect(dedupeScope('sms', 'user-1')).not.toBe(dedupeScope('email', 'user-1'));
    expect(dedupeScope('a\u0000b', 'c')).not.toBe(dedupeScope('a', 'b\u0000c'));
    expect(dedupeScope('a","b', 'c')).not.toBe(dedupeScope('a', 'b","c'));
  });
});
