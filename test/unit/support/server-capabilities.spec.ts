import { describe, expect, it } from '@jest/globals';
import { serverSummary, transactionSupport } from '../../support/server-capabilities';

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

describe('the server line of the harness log (MONGODB_URI)', () => {
  it('names the version and the topology, and whether the replica-set tests run', () => {
    const sessions = { logicalSessionTimeoutMinutes: 30 };
    expect(serverSummary({ version: '8.0.4' }, { setName: 'rs0', isWritablePrimary: true, ...sessions })).toBe(
      'MongoDB 8.0.4, replica set "rs0" primary; transactions: the replica-set tests run',
    );
    expect(serverSummary({ version: '6.0.19' }, { isWritablePrimary: true, ...sessions })).toBe(
      'MongoDB 6.0.19, standalone; no transactions: the replica-set tests are skipped',
    );
    // A mongod started with --replSet whose rs.initiate() did not run answers isreplicaset and no setName.
    expect(serverSummary({ version: '7.0.1' }, { isWritablePrimary: false, isreplicaset: true, ...sessions })).toBe(
      'MongoDB 7.0.1, started with --replSet but not initiated (no rs.initiate()); no transactions: the replica-set ' +
        'tests are skipped',
    );
    expect(serverSummary({}, { setName: 'rs0', ismaster: false, ...sessions })).toBe(
      'no version in buildInfo, replica set "rs0" member (not primary); transactions: the replica-set tests run',
    );
  });
});
