import { describe, expect, it } from '@jest/globals';
import type { JobEvent } from '../../../lib';
import { JobEvents } from '../../../lib/model/events/job-events';

const job = (attempt: number) => ({ jobId: 'a1', name: 'n', attempt });

function recorded(events: JobEvents): string[] {
  const seen: string[] = [];
  events.events$.subscribe((event: JobEvent) => seen.push(`${event.type}#${event.attempt}`));
  return seen;
}

describe('JobEvents: one job in lifecycle order', () => {
  it("puts an attempt's outcome before a next start emitted while its write was under way", () => {
    const events = new JobEvents();
    const seen = recorded(events);
    const slot = events.reserveOutcome(job(1));
    events.emit('renewed', job(1)); // its own lease: goes out at once
    events.emit('started', job(2)); // the retry, claimed before the failure write's answer
    expect(seen).toEqual(['renewed#1']);
    slot.emit('retrying', 'boom');
    slot.release();
    events.emit('completed', job(2));
    expect(seen).toEqual(['renewed#1', 'retrying#1', 'started#2', 'completed#2']);
  });

  it('a slot released without an event lets what waited behind it out, once', () => {
    const events = new JobEvents();
    const seen = recorded(events);
    const slot = events.reserveOutcome(job(1));
    events.emit('cancelled', job(1));
    slot.release();
    slot.release();
    slot.emit('retrying'); // too late: ignored
    expect(seen).toEqual(['cancelled#1']);
  });

  it('an outcome slot opened inside an enqueue hold waits for enqueued, and drains wait only for the enqueue', () => {
    const events = new JobEvents();
    const seen = recorded(events);
    const releaseEnqueue = events.hold(['a1']);
    events.emit('started', job(1));
    const slot = events.reserveOutcome(job(1));
    events.emit('renewed', job(1)); // passes the outcome slot, not the enqueue hold
    slot.emit('completed');
    slot.release();
    expect(seen).toEqual([]);
    expect(events.enqueuesInFlight).toBe(true);
    events.emit('enqueued', job(0));
    releaseEnqueue();
    expect(seen).toEqual(['enqueued#0', 'started#1', 'renewed#1', 'completed#1']);
    expect(events.enqueuesInFlight).toBe(false);
  });

  it('an outcome slot alone does not count as an enqueue in flight', () => {
    const events = new JobEvents();
    const slot = events.reserveOutcome(job(1));
    expect(events.enqueuesInFlight).toBe(false);
    slot.release();
  });
});
