/** A short, safe rendering of a user-supplied value for error messages (never a whole payload). */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value);
  if (value instanceof Date) return `Date(${Number.isNaN(value.getTime()) ? 'Invalid Date' : value.toISOString()})`;
  return typeof value === 'object' ? `an object (${Object.prototype.toString.call(value)})` : typeof value;
}
