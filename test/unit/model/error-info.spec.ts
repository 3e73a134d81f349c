import { describe, expect, it } from '@jest/globals';
import { mongo } from 'mongoose';
import {
  ERROR_CLASS_MAX_BYTES,
  ERROR_MESSAGE_MAX_BYTES,
  ERROR_STACK_MAX_BYTES,
  errorInfo,
} from '../../../lib/model/error-info';
import { MAX_ATTEMPT_HISTORY, MAX_PAYLOAD_BYTES } from '../../../lib/model/jobs.constants';

const utf8 = (text: string | undefined) => Buffer.byteLength(text ?? '');
const NINE_MB = 9 * 1024 * 1024;

describe('errorInfo', () => {
  it('keeps an ordinary error whole, with its stack', () => {
    const error = new TypeError('bad thing');
    expect(errorInfo(error)).toEqual({ message: 'bad thing', errorClass: 'TypeError', stack: error.stack });
  });

  it('bounds a huge message and stack and says they were truncated', () => {
    const error = new Error('é'.repeat(NINE_MB));
    const info = errorInfo(error);
    expect(utf8(info.message)).toBeLessThanOrEqual(ERROR_MESSAGE_MAX_BYTES);
    expect(info.message).toMatch(/^éé.*\[truncated, \d+ characters in all\]$/s);
    expect(utf8(info.stack)).toBeLessThanOrEqual(ERROR_STACK_MAX_BYTES);
    expect(info.stack).toMatch(/^Error: éé.* … \[truncated, \d+ characters in all\] … /s);
    expect(info.message).not.toContain('\uFFFD');
  });

  it('bounds a huge name', () => {
    const error = new Error('boom');
    error.name = 'N'.repeat(NINE_MB);
    const info = errorInfo(error);
    expect(utf8(info.errorClass)).toBeLessThanOrEqual(ERROR_CLASS_MAX_BYTES);
    expect(info.message).toBe('boom');
  });

  it('survives a message getter that throws', () => {
    const error = new Error('x');
    Object.defineProperty(error, 'message', {
      get() {
        throw new Error('nope');
      },
    });
    const info = errorInfo(error);
    expect(info.errorClass).toBe('Error');
    expect(info.message).toContain('unreadable');
  });

  it('renders a non-string message', () => {
    const error = new Error('x');
    (error as { message: unknown }).message = { code: 42 };
    expect(errorInfo(error).message).toBe('{"code":42}');
  });

  it('survives a Proxy that throws on every access', () => {
    const hostile = new Proxy(
      {},
      {
        get() {
          throw new Error('trap');
        },
        getPrototypeOf() {
          throw new Error('trap');
        },
      },
    );
    const info = errorInfo(hostile);
    expect(info.errorClass).toBe('NonError');
    expect(typeof info.message).toBe('string');
  });

  it('survives a thrown object whose toJSON throws, and bounds one whose toJSON is huge', () => {
    const throwing = errorInfo({
      toJSON() {
        throw new Error('nope');
      },
    });
    expect(throwing.errorClass).toBe('NonError');
    expect(throwing.message).toContain('[object Object]');
    const huge = errorInfo({ toJSON: () => 'y'.repeat(NINE_MB) });
    expect(utf8(huge.message)).toBeLessThanOrEqual(ERROR_MESSAGE_MAX_BYTES);
  });

  it('bounds a huge thrown string', () => {
    expect(utf8(errorInfo('z'.repeat(NINE_MB)).message)).toBeLessThanOrEqual(ERROR_MESSAGE_MAX_BYTES);
  });

  it('follows the cause chain into the stack, cycles included', () => {
    const root = new RangeError('root cause');
    const outer = new Error('outer', { cause: root });
    (root as { cause?: unknown }).cause = outer;
    const info = errorInfo(outer);
    expect(info.message).toBe('outer');
    expect(info.stack).toContain('Caused by: RangeError: root cause');
    expect(info.stack?.match(/Caused by/g)).toHaveLength(1);
  });

  it('fits the full attempt history of worst-case errors next to the largest payload', () => {
    const worst = new Error('\uD800'.repeat(NINE_MB));
    worst.name = '\uD800'.repeat(NINE_MB);
    worst.stack = '\uD800'.repeat(NINE_MB);
    const info = errorInfo(worst);
    const attempt = { at: new Date(), error: info.message, errorClass: info.errorClass, stack: info.stack };
    const doc = {
      _id: new mongo.ObjectId(),
      name: 'n'.repeat(200),
      payload: { blob: 'p'.repeat(MAX_PAYLOAD_BYTES - 100) },
      status: 'pending',
      runAt: new Date(),
      priority: 0,
      attemptCount: 1,
      maxAttempts: 100,
      attempts: Array.from({ length: MAX_ATTEMPT_HISTORY }, () => attempt),
      lastError: info.message,
      lockedBy: 'w'.repeat(300),
      lockedUntil: new Date(),
      fencingToken: 1,
      dedupeKey: 'd'.repeat(200),
      createdAt: new Date(),
      updatedAt: new Date(),
      startedAt: new Date(),
      finishedAt: new Date(),
    };
    expect(mongo.BSON.calculateObjectSize(doc)).toBeLessThanOrEqual(16 * 1024 * 1024);
  });
});
