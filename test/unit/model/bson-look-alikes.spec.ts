import { describe, expect, it } from '@jest/globals';
import * as topLevelBson from 'bson';
import * as topLevelDriver from 'mongodb';
import { mongo, Types } from 'mongoose';
import { InvalidPayloadError, InvalidProgressError, UnstorableResultError } from '../../../lib';
import { assertStorablePayload } from '../../../lib/model/payload-validator';
import { assertValidProgress } from '../../../lib/model/progress-validator';
import { assertStorableResult } from '../../../lib/model/result-validator';
import { createTestJobContext } from '../../../lib/testing';

/** An upstream API's answer passed through: a plain object that carries the bson library's type tag. */
const lookAlike = (bsontype: unknown = 'ObjectId') => ({ _bsontype: bsontype, id: 'aaaaaaaaaaaaaaaaaaaaaaaa' });

/** A class instance tagged like a BSON value of another major version of the bson library (bson 6 here). */
class OtherMajorObjectId {
  readonly _bsontype = 'ObjectId';
  get [Symbol.for('@@mdb.bson.version')]() {
    return 6;
  }
}

/** `{ level: { level: … { value } } }`, `depth` levels deep. */
function nested(depth: number, value: unknown): unknown {
  let current = value;
  for (let level = 0; level < depth; level += 1) current = { level: current };
  return current;
}

/** The three values the library stores for a user, each through its own validator and typed error. */
const PATHS = [
  {
    what: 'payload',
    check: (value: unknown) => assertStorablePayload(value),
    error: InvalidPayloadError,
  },
  {
    what: 'progress',
    check: (value: unknown) => assertValidProgress(value),
    error: InvalidProgressError,
  },
  {
    what: 'result',
    check: (value: unknown) => assertStorableResult('job-1', value, {}),
    error: UnstorableResultError,
  },
] as const;

const LOOK_ALIKES: [string, unknown, string][] = [
  ['an ObjectId look-alike at the top level', { ref: lookAlike() }, 'ref'],
  ['a look-alike of an unknown type', { ref: lookAlike('Foo') }, 'ref'],
  ['a look-alike with a non-string tag', { ref: lookAlike(5) }, 'ref'],
  ['a look-alike in an array', { items: [1, { id: lookAlike('Decimal128') }] }, 'items.1.id'],
  ['a look-alike 80 levels deep', { deep: nested(80, lookAlike()) }, `deep${'.level'.repeat(80)}`],
  ['a null-prototype look-alike', { ref: Object.assign(Object.create(null), lookAlike()) }, 'ref'],
  ['a BSON value of another bson major version', { ref: new OtherMajorObjectId() }, 'ref'],
];

describe('BSON look-alikes are refused before anything is written, with the typed error of each path', () => {
  for (const { what, check, error } of PATHS) {
    describe(what, () => {
      it.each(LOOK_ALIKES)('refuses %s, naming its path', (_label, value, path) => {
        let thrown: unknown;
        try {
          check(value);
        } catch (caught) {
          thrown = caught;
        }
        expect(thrown).toBeInstanceOf(error);
        expect((thrown as Error).message).toContain(`${what}.${path} `);
        expect((thrown as Error).message).toMatch(/_bsontype|bson library/);
      });

      it('refuses a cyclic value beside a look-alike without looping', () => {
        const cyclic: Record<string, unknown> = { ok: 1 };
        cyclic.self = cyclic;
        expect(() => check({ cyclic, ref: lookAlike() })).toThrow(error);
      });

      it.each([
        ["mongoose's ObjectId", new Types.ObjectId()],
        ["the top-level mongodb package's ObjectId", new topLevelDriver.ObjectId()],
        ["the top-level bson package's ObjectId", new topLevelBson.ObjectId()],
        ['a Date', new Date(0)],
        ['a Buffer', Buffer.from('abc')],
        ['a plain object whose _bsontype is null (the serializer writes it as data)', { _bsontype: null, a: 1 }],
      ])('accepts %s, at the top level, nested and in arrays', (_label, real) => {
        expect(() => check({ real, nested: { deeper: [real, { real }] } })).not.toThrow();
      });

      it.each([
        ['Decimal128', mongo.BSON.Decimal128.fromString('1.5')],
        ['Binary', new topLevelBson.Binary(Buffer.from('abc'))],
        ['Long', topLevelDriver.Long.fromNumber(5)],
      ])('keeps refusing a real %s as a class instance (as before), never as a look-alike', (type, real) => {
        expect(() => check({ real })).toThrow(`${what}.real is a ${type} instance`);
      });
    });
  }

  it('the testing kit refuses a look-alike progress as a real context does', async () => {
    const ctx = createTestJobContext();
    await expect(ctx.updateProgress({ upstream: [lookAlike()] } as never)).rejects.toThrow(InvalidProgressError);
    await expect(ctx.updateProgress({ upstream: [lookAlike()] } as never)).rejects.toThrow(
      'progress.upstream.0 has a "_bsontype" key',
    );
    expect(ctx.progressUpdates).toEqual([]);
  });
});
