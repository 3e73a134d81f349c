import { describe, expect, it } from '@jest/globals';
import { NextDue } from '../../../lib/claim/next-due';
import type { ClaimedJob } from '../../../lib/model/claimed-job';

/** A claim step and a read of the earliest runAt, counted, answering what the test sets. */
function store() {
  const calls: string[] = [];
  const state = { job: null as ClaimedJob | null, earliest: null as Date | null };
  return {
    calls,
    state,
    claim: async () => {
      calls.push('claim');
      return state.job;
    },
    read: async () => {
      calls.push('read');
      return state.earliest;
    },
  };
}
const job = { lockId: 'w#1' } as ClaimedJob;
const inMs = (ms: number) => new Date(Date.now() + ms);

describe('NextDue', () => {
  it('claims at once until a claim finds nothing; then reads the next due time once', async () => {
    const due = new NextDue();
    const s = store();
    s.state.job = job;
    expect(await due.take(s.claim, s.read)).toBe(job);
    s.state.job = null;
    s.state.earliest = inMs(5_000);
    expect(await due.take(s.claim, s.read)).toBeNull();
    expect(s.calls).toEqual(['claim', 'claim', 'read']);
    expect(due.known).toBe(s.state.earliest.getTime());
  });

  it('while quiet, a poll reads instead of claiming, and claims only when the read says a job is due', async () => {
    const due = new NextDue();
    const s = store();
    await due.take(s.claim, s.read); // claim (empty), read (none pending)
    expect(due.known).toBeUndefined();
    s.calls.length = 0;
    expect(await due.take(s.claim, s.read)).toBeNull();
    expect(s.calls).toEqual(['read']);
    s.state.earliest = inMs(-1);
    s.state.job = job;
    expect(await due.take(s.claim, s.read)).toBe(job);
    expect(s.calls).toEqual(['read', 'read', 'claim']);
  });

  it('a known due time that has come needs no read; taken by another worker, it is forgotten', async () => {
    const due = new NextDue();
    const s = store();
    s.state.earliest = inMs(-1); // fell due between the claim and the read
    await due.take(s.claim, s.read);
    s.calls.length = 0;
    expect(await due.take(s.claim, s.read)).toBeNull(); // another worker took it
    expect(s.calls).toEqual(['claim']);
    expect(due.known).toBeUndefined();
  });

  it('heard() makes the known time earlier, never later; arrived() ends the quiet spell', async () => {
    const due = new NextDue();
    const s = store();
    s.state.earliest = inMs(10_000);
    await due.take(s.claim, s.read);
    const read = due.known as number;
    due.heard(read + 1_000);
    expect(due.known).toBe(read);
    due.heard(read - 5_000);
    expect(due.known).toBe(read - 5_000);
    due.arrived();
    expect(due.known).toBeUndefined();
    s.calls.length = 0;
    await due.take(s.claim, s.read);
    expect(s.calls).toEqual(['claim', 'read']);
  });
});
