import { describe, expect, it } from '@jest/globals';
import { transactionSupport } from '../../support/server-capabilities';

describe('transaction support, read from what the server answers', () => {
  it('a replica-set member with sessions', () => {
    expect(transactionSupport({ setName: 'rs0', logicalSessionTimeoutMinutes: 30 }).supported).toBe(true);
  });

  it('a router (mongos, DocumentDB gateway) answers isdbgrid and no setName', () => {
    expect(transactionSupport({ msg: 'isdbgrid', logicalSessionTimeoutMinutes: 30 })).toEqual({
      supported: true,
      reason: 'a router (isdbgrid) with sessions',
    });
  });

  it('a standalone, or a server without sessions (the Java test server), says which is missing', () => {
    expect(transactionSupport({ isWritablePrimary: true, logicalSessionTimeoutMinutes: 30 })).toEqual({
      supported: false,
      reason: 'the test server has neither a replica set (setName) nor a router (isdbgrid) in its hello',
    });
    expect(transactionSupport({ setName: 'rs0' }).reason).toBe(
      'the test server has no sessions (logicalSessionTimeoutMinutes) in its hello',
    );
  });
});
