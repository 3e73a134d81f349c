import { DateTime } from 'luxon';

/**
 * Worker-side time. Every timestamp the library writes comes from here, never from the server
 * ($currentDate/$$NOW are outside the MongoDB subset we rely on), so all arithmetic is in one place.
 */
export function now(): Date {
  return DateTime.now().toJSDate();
}

export function addMs(date: Date, ms: number): Date {
  return DateTime.fromJSDate(date).plus({ milliseconds: ms }).toJSDate();
}
