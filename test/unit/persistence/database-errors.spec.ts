import { EventEmitter } from 'node:events';
import { describe, expect, it } from '@jest/globals';
import { mongo } from 'mongoose';
import { commandError, refusedWrites } from '../../../lib/persistence/bulk-write-errors';
import {
  classifyWriteError,
  isBulkWriteConcernError,
  isDocumentUpdateError,
  isPermanentWriteError,
  mayHaveLanded,
  type WriteErrorKind,
  WriteOutcomeUnknownError,
} from '../../../lib/persistence/database-errors';
import { watchRetryableWriteServers } from '../../../lib/persistence/retryable-write-servers';

const serverError = (code: number | undefined, labels: string[] = []) => {
  const error = new mongo.MongoServerError({ message: `code ${code}`, code, errorLabels: labels });
  return error;
};

describe('classifyWriteError', () => {
  it.each<[string, WriteErrorKind, unknown]>([
    // About the document written: the same write fails the same way.
    ['2 BadValue', 'permanent', serverError(2)],
    ['14 TypeMismatch', 'permanent', serverError(14)],
    ['28 PathNotViable', 'permanent', serverError(28)],
    ['121 DocumentValidationFailure', 'permanent', serverError(121)],
    ['10334 BSONObjectTooLarge', 'permanent', serverError(10334)],
    ['17419 document too large after the update', 'permanent', serverError(17419)],
    ['17280 KeyTooLong', 'permanent', serverError(17280)],
    ['a BSON error raised before sending', 'permanent', new mongo.BSON.BSONError('cannot serialize')],
    ['a BSONVersionError raised before sending', 'permanent', new mongo.BSON.BSONVersionError()],
    ['an invalid argument', 'permanent', new mongo.MongoInvalidArgumentError('bad option')],
    ['the serializer overflowing its buffer', 'permanent', new RangeError('offset out of range')],
    // Known to say "not now".
    ['11602 InterruptedDueToReplStateChange', 'transient', serverError(11602)],
    ['91 ShutdownInProgress', 'transient', serverError(91)],
    ['50 MaxTimeMSExpired', 'transient', serverError(50)],
    ['64 WriteConcernFailed', 'transient', serverError(64)],
    ['10107 NotWritablePrimary', 'transient', serverError(10107)],
    ['a document code with RetryableWriteError', 'transient', serverError(2, ['RetryableWriteError'])],
    [
      'an unfamiliar code with TransientTransactionError',
      'transient',
      serverError(99999, ['TransientTransactionError']),
    ],
    ['a network error', 'transient', new mongo.MongoNetworkError('socket closed')],
    ['no server to select', 'transient', new mongo.MongoServerSelectionError('no primary', {} as never)],
    ['a closed topology', 'transient', new mongo.MongoTopologyClosedError()],
    // Not known either way: retried for one lease, then left to the lease. Never permanent for being unfamiliar.
    ['11601 Interrupted', 'unknown', serverError(11601)],
    ['11000 DuplicateKey (about other rows too)', 'unknown', serverError(11000)],
    ['a made-up code 99999', 'unknown', serverError(99999)],
    ['a server error without a code', 'unknown', serverError(undefined)],
    ['a plain Error', 'unknown', new Error('something else')],
    ['a thrown string', 'unknown', 'oops'],
  ])('%s → %s', (_label, kind, error) => {
    expect(classifyWriteError(error)).toBe(kind);
    expect(isPermanentWriteError(error)).toBe(kind === 'permanent');
  });
});

describe('isDocumentUpdateError (claims set a row aside only for these)', () => {
  it.each([2, 14, 28, 10334, 17419])('code %i is a refusal of the matched document', (code) => {
    expect(isDocumentUpdateError(serverError(code))).toBe(true);
  });

  it.each<[string, unknown]>([
    ['11601', serverError(11601)],
    ['99999', serverError(99999)],
    ['no code', serverError(undefined)],
    ['121 (a validator judges the whole collection, not this row)', serverError(121)],
    ['2 with RetryableWriteError', serverError(2, ['RetryableWriteError'])],
    ['a network error', new mongo.MongoNetworkError('socket closed')],
  ])('%s is not', (_label, error) => {
    expect(isDocumentUpdateError(error)).toBe(false);
  });
});

describe('batched writes whose effect is unknown', () => {
  /** What the driver throws for a bulk write whose reply carried a write concern error (bulk/common.js). */
  const bulkWriteConcernError = () =>
    new mongo.MongoBulkWriteError({ message: 'waiting for replication timed out', code: 64 }, {
      getWriteConcernError: () => ({ code: 64, errmsg: 'waiting for replication timed out' }),
    } as never);

  it('a bulk write with a write concern error may have landed, as a lone write with one may (the rows are read back)', () => {
    expect(isBulkWriteConcernError(bulkWriteConcernError())).toBe(true);
    expect(mayHaveLanded(bulkWriteConcernError())).toBe(true);
    expect(refusedWrites(bulkWriteConcernError())).toBeUndefined();
    expect(mayHaveLanded(commandError(bulkWriteConcernError()))).toBe(true);
  });

  it('a bulk write that failed op by op, with no write concern error, is no such error', () => {
    const refused = new mongo.MongoBulkWriteError({ message: 'E11000', code: 11000, writeErrors: [] }, {
      getWriteConcernError: () => undefined,
    } as never);
    expect(isBulkWriteConcernError(refused)).toBe(false);
    expect(mayHaveLanded(refused)).toBe(false);
  });

  it('a batched write whose matched-rows read failed may have landed, and is sent again', () => {
    const unknown = new WriteOutcomeUnknownError(new mongo.MongoServerSelectionError('no primary', {} as never));
    expect(mayHaveLanded(unknown)).toBe(true);
    expect(classifyWriteError(unknown)).toBe('transient');
  });
});

describe('errors after which a write may have reached the server', () => {
  const selectionError = (type: string) => new mongo.MongoServerSelectionError('no server', { type } as never);

  it('a selection error on a standalone server, or before any server was known, means the write was never sent', () => {
    expect(mayHaveLanded(selectionError(mongo.TopologyType.Single))).toBe(false);
    expect(mayHaveLanded(selectionError(mongo.TopologyType.Unknown))).toBe(false);
  });

  it.each([
    mongo.TopologyType.ReplicaSetNoPrimary,
    mongo.TopologyType.ReplicaSetWithPrimary,
    mongo.TopologyType.Sharded,
    mongo.TopologyType.LoadBalanced,
  ])('a selection error on a %s topology may follow a retryable write whose first attempt landed', (type) => {
    expect(mayHaveLanded(selectionError(type))).toBe(true);
    // Still "not now": the write is sent again (fenced), and a later miss is checked against the row.
    expect(classifyWriteError(selectionError(type))).toBe('transient');
  });

  it('on a direct connection, a selection error is in doubt once that server was seen as a replica-set primary', () => {
    const client = Object.assign(new EventEmitter(), {
      topology: { description: { servers: new Map([['10.0.0.1:27017', { type: mongo.ServerType.RSPrimary }]]) } },
    });
    const singleDown = (address: string) =>
      new mongo.MongoServerSelectionError('no server', {
        type: mongo.TopologyType.Single,
        servers: new Map([[address, { type: mongo.ServerType.Unknown }]]),
      } as never);
    expect(mayHaveLanded(singleDown('10.0.0.1:27017'))).toBe(false); // nothing learnt yet: a standalone, as far as known

    watchRetryableWriteServers(client);
    // Known from the client's description at the time it was watched: its retry may have followed a landed attempt.
    expect(mayHaveLanded(singleDown('10.0.0.1:27017'))).toBe(true);
    // Learnt from its monitoring later: a router, then the same address serving a standalone.
    const described = (address: string, type: string) =>
      client.emit('serverDescriptionChanged', { address, newDescription: { type } });
    expect(mayHaveLanded(singleDown('10.0.0.2:27017'))).toBe(false);
    described('10.0.0.2:27017', mongo.ServerType.Mongos);
    expect(mayHaveLanded(singleDown('10.0.0.2:27017'))).toBe(true);
    described('10.0.0.2:27017', mongo.ServerType.Unknown); // going down changes nothing
    expect(mayHaveLanded(singleDown('10.0.0.2:27017'))).toBe(true);
    described('10.0.0.2:27017', mongo.ServerType.Standalone);
    expect(mayHaveLanded(singleDown('10.0.0.2:27017'))).toBe(false);
    // Watching a client twice adds no second listener.
    watchRetryableWriteServers(client);
    expect(client.listenerCount('serverDescriptionChanged')).toBe(1);
  });

  it('close() interrupting a command on a checked-out connection leaves it in doubt', () => {
    expect(mayHaveLanded(new mongo.MongoClientClosedError())).toBe(true);
  });

  it('a reply the driver could not read came from a server that received the command', () => {
    expect(
      mayHaveLanded(new mongo.MongoUnexpectedServerResponseError('Selected server does not support retryable writes')),
    ).toBe(true);
  });

  it('a topology closed before sending, or never connected, sent nothing', () => {
    expect(mayHaveLanded(new mongo.MongoTopologyClosedError())).toBe(false);
    expect(mayHaveLanded(new mongo.MongoNotConnectedError('not connected'))).toBe(false);
  });
});
