/**
 * A short, safe rendering of a user-supplied value for error messages (never a whole payload): its kind and size, and
 * at most the first few key names of a plain object, never the values inside it.
 */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value);
  if (typeof value === 'function') return 'a function';
  if (typeof value !== 'object') return typeof value;
  try {
    return describeObject(value);
  } catch {
    // a proxy or an exotic object whose inspection throws
    return 'an object';
  }
}

const SHOWN_KEYS = 5;

function describeObject(value: object): string {
  if (value instanceof Date) return `Date(${Number.isNaN(value.getTime()) ? 'Invalid Date' : value.toISOString()})`;
  if (Array.isArray(value)) return value.length === 0 ? 'an empty array' : `an array of ${count(value.length, 'item')}`;
  if (value instanceof Set) return `a Set of ${count(value.size, 'item')}`;
  if (value instanceof Map) return `a Map of ${count(value.size, 'entry', 'entries')}`;
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== null && prototype !== Object.prototype) {
    const name = typeof prototype.constructor === 'function' ? prototype.constructor.name : '';
    return name ? `an instance of ${name.slice(0, 40)}` : 'an object';
  }
  const keys = Object.keys(value);
  if (keys.length === 0) return 'an empty object';
  const shown = keys.slice(0, SHOWN_KEYS).map((key) => JSON.stringify(key.length > 40 ? `${key.slice(0, 40)}…` : key));
  const more = keys.length > SHOWN_KEYS ? ` and ${keys.length - SHOWN_KEYS} more` : '';
  return `an object with ${keys.length === 1 ? 'key' : 'keys'} ${shown.join(', ')}${more}`;
}

function count(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
