import { describe, expect, it } from '@jest/globals';
import { Types } from 'mongoose';
import { InvalidPayloadError } from '../../../lib';
import { assertStorablePayload } from '../../../lib/model/payload-validator';

describe('assertStorablePayload', () => {
  it.each([
    ['undefined', undefined],
    ['null', null],
    ['a string', 'x'],
    ['nested plain data', { a: [1, { b: 'c' }], d: true, e: null, when: new Date(0), id: new Types.ObjectId() }],
    ['a Buffer', Buffer.from('abc')],
    ['a Uint8Array', { bytes: new Uint8Array([1, 2]) }],
    ['a null-prototype object', Object.assign(Object.create(null), { a: 1 })],
  ])('accepts %s', (_label, payload) => {
    expect(() => assertStorablePayload(payload)).not.toThrow();
  });

  const circular: Record<string, unknown> = { a: 1 };
  circular.self = circular;

  it.each([
    ['a function', { run: () => 1 }, 'payload.run is a function'],
    ['a symbol', { s: Symbol('x') }, 'payload.s is a symbol'],
    ['a bigint', { n: 10n }, 'payload.n is a bigint'],
    ['a circular reference', circular, 'payload.self is a circular reference'],
    ['a $-prefixed key', { $where: 'x' }, 'payload.$where has a key starting with "$"'],
    ['a dotted key', { nested: { 'a.b': 1 } }, 'payload.nested.a.b has a key'],
    ['a Map', { m: new Map() }, 'payload.m is a Map instance'],
    ['a Float64Array', { f: new Float64Array(1) }, 'payload.f is a Float64Array instance; store its bytes as a Buffer'],
    ['an invalid Date', { at: new Date(Number.NaN) }, 'payload.at is an invalid Date'],
    ['a top-level function', () => 1, 'the payload is a function'],
  ])('rejects %s with a path', (_label, payload, message) => {
    expect(() => assertStorablePayload(payload)).toThrow(InvalidPayloadError);
    expect(() => assertStorablePayload(payload)).toThrow(message);
  });

  it('rejects a payload over the document size limit', () => {
    const big = { blob: 'x'.repeat(16 * 1024 * 1024) };
    expect(() => assertStorablePayload(big)).toThrow(/bytes as BSON, over the limit/);
  });
});
