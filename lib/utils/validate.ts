import { InvalidOptionError } from '../errors/invalid-option.error';

/** Shared option rules; each throws InvalidOptionError naming the option. */

export function positiveFinite(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new InvalidOptionError(option, value, 'must be a finite number greater than 0');
  }
  return value;
}

export function nonNegativeFinite(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new InvalidOptionError(option, value, 'must be a finite number of at least 0');
  }
  return value;
}

export function positiveInteger(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) {
    throw new InvalidOptionError(option, value, 'must be an integer greater than 0');
  }
  return value;
}

export function finiteNumber(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new InvalidOptionError(option, value, 'must be a finite number');
  }
  return value;
}

export function nonEmptyString(option: string, value: unknown, maxLength = 200): string {
  if (typeof value !== 'string' || value.trim() === '' || value.length > maxLength) {
    throw new InvalidOptionError(option, value, `must be a non-empty string of at most ${maxLength} characters`);
  }
  return value;
}
