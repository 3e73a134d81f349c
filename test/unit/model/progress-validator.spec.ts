import { describe, expect, it } from '@jest/globals';
import { Types } from 'mongoose';
import { InvalidProgressError } from '../../../lib';
import { MAX_PROGRESS_BYTES } from '../../../lib/model/jobs.constants';
import { assertValidProgress } from '../../../lib/model/progress-validator';

describe('assertValidProgress', () => {
  it.each([
    ['0', 0],
    ['100', 100],
    ['a fraction', 42.5],
    ['a plain object', { done: 3, total: 10, stage: 'upload', at: new Date(), ref: new Types.ObjectId() }],
    ['a null-prototype object', Object.assign(Object.create(null), { done: 1 })],
    ['an object with nested arrays', { files: ['a', 'b'], counts: [1, 2] }],
  ])('accepts %s', (_label, value) => {
    expect(() => assertValidProgress(value)).not.toThrow();
  });

  it.each([
    ['NaN', Number.NaN, 'a number from 0 to 100'],
    ['Infinity', Number.POSITIVE_INFINITY, 'a number from 0 to 100'],
    ['101', 101, 'a number from 0 to 100'],
    ['-1', -1, 'a number from 0 to 100'],
    ['a string', '50%', 'is a string'],
    ['null', null, 'is null'],
    ['undefined', undefined, 'is undefined'],
    ['a boolean', true, 'is a boolean'],
    ['an array', [1, 2], 'is an array'],
    ['a function', () => 50, 'is a function'],
    ['a Map', new Map([['done', 1]]), 'Map'],
    ['a function inside', { done: 1, report: () => 'x' }, 'progress.report is a function'],
    ['a $ key', { $set: 1 }, 'progress.$set has a key starting with "$"'],
  ])('rejects %s with InvalidProgressError naming the problem', (_label, value, problem) => {
    let thrown: unknown;
    try {
      assertValidProgress(value);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(InvalidProgressError);
    expect((thrown as Error).message).toContain(problem);
  });

  it(`rejects an object over ${MAX_PROGRESS_BYTES} bytes as BSON, with its size`, () => {
    expect(() => assertValidProgress({ log: 'x'.repeat(MAX_PROGRESS_BYTES) })).toThrow(
      /progress is \d+ bytes as BSON, over the limit of 4096/,
    );
  });
});
