import { describe, expect, it } from '@jest/globals';
import { mongo } from 'mongoose';
import { decodePayload } from '../../../lib/model/payload-codec';

/** What the driver hands back for a stored payload. */
const stored = (value: unknown) => mongo.BSON.deserialize(mongo.BSON.serialize({ payload: value })).payload;

describe('decodePayload', () => {
  it('turns stored bytes back into Buffers at any depth, a top-level one included', () => {
    const back = decodePayload(stored({ a: Buffer.from('x'), b: [new Uint8Array([1, 2])], c: { d: Buffer.alloc(0) } }));
    expect(back).toStrictEqual({ a: Buffer.from('x'), b: [Buffer.from([1, 2])], c: { d: Buffer.alloc(0) } });
    expect(decodePayload(stored(Buffer.from([3])))).toStrictEqual(Buffer.from([3]));
  });

  it('copies the bytes out of the driver’s buffer', () => {
    const binary = new mongo.BSON.Binary(Buffer.from([1, 2, 3]));
    const decoded = decodePayload({ b: binary }).b as unknown as Buffer;
    decoded[0] = 9;
    expect(binary.buffer[0]).toBe(1);
  });

  it('returns payloads without bytes as they are, unchanged', () => {
    const inner = { b: 'c' };
    const when = new Date(0);
    const id = new mongo.ObjectId();
    const value = { a: [1, inner], when, id, none: null };
    expect(decodePayload(value)).toBe(value);
    expect(value).toStrictEqual({ a: [1, { b: 'c' }], when, id, none: null });
    expect(value.a[1]).toBe(inner);
    expect(value.when).toBe(when);
    expect(value.id).toBe(id);
  });

  it('leaves binary subtypes it did not write (e.g. UUID) as the driver gives them', () => {
    const decoded = decodePayload({ id: new mongo.BSON.UUID().toBinary() }) as { id: unknown };
    expect(decoded.id).toBeInstanceOf(mongo.BSON.Binary);
  });
});
