import type { HistoryLine } from './history';
import { stalledWithin } from './machine-stalls';
import type { TortureProfile, WorkloadName } from './profiles';
import type { RowSnapshot } from './row-watcher';

/** One broken guarantee: which invariant, what happened, and the history lines that show it. */
export interface Violation {
  invariant: 1 | 2 | 3 | 4 | 5 | 6;
  title: string;
  job?: string;
  detail: string;
  evidence: HistoryLine[];
}

/** Counts of what a run did, for reports and for "did the planned faults happen". */
export interface RunSummary {
  operations: Record<string, number>;
  faults: Record<string, number>;
  handlerCalls: number;
  /** State-keyed triggers that fired, by label (test/torture/triggers.ts). */
  triggers: Record<string, number>;
  jobs: number;
  finalStatuses: Record<string, number>;
  rowsSettled: boolean;
}

export interface CheckContext {
  profile: TortureProfile;
  seed: number;
  /** Names no process handles: their jobs may stay pending. */
  orphanNames: string[];
  names: WorkloadName[];
}

/**
 * `close()`'s documented bound is `shutdownGraceMs` + 3 s plus Nest's own hooks; this much is allowed for those
 * hooks (closing mongoose) and for a loaded machine.
 */
const CLOSE_SLACK_MS = 1_000;

/** One handler call as the history tells it. */
export interface HandlerCall {
  call: string;
  job: string;
  name: string;
  lock: string;
  attempt: number;
  process: string;
  group: string | null;
  start: number;
  end?: number;
  how?: 'resolved' | 'threw' | 'threw-abort';
  abortReason?: string;
  leaseLost: boolean;
  ignoredSignal: boolean;
  /** The last lease deadline the handler saw. */
  deadline: number;
  /** Every lease deadline it saw, with when it saw it. */
  deadlines: { t: number; deadline: number }[];
  /** When its lease loss (or, for a call that ignores its signal, the abort it ignored) was recorded. */
  lossRecordedAt?: number;
  /** When it settled, or its process exited; infinity if neither happened. */
  settledAt: number;
  /** When its process exited, if it did before the call settled (killed). */
  exitedAt?: number;
  /** Until when the call counts as live for the fleet limits: settled, or its lost lease's deadline. */
  liveUntil: number;
  /**
   * For a call whose job was cancelled while it ran (a cancel answered `cancelled`): when that cancel was asked, and
   * the end of its documented settle window, the last lease deadline the call had seen by then plus one lease. Until
   * then its row and slots stay taken and no retry runs, whatever reason the library gives its abort.
   */
  cancelledAt?: number;
  settleWindowEnd?: number;
  lines: HistoryLine[];
}

/**
 * Judges one run: the invariants of issue 24 over the history and the final rows.
 *
 * A handler call is live from its start until it settles (or its process exits); if its lease was lost (or it ignored
 * its aborted signal, so the library stopped renewing it after the settle window), only until the last lease deadline
 * it saw: the row and its slots are taken until then, and another owner may start at that deadline. The loss must be
 * on record by then, give or take the profile's timer tolerance (`timerToleranceMs`: how late a lease timer may fire
 * on a loaded machine); see invariant 1.
 */
export function checkRun(
  lines: HistoryLine[],
  finalRows: RowSnapshot[],
  context: CheckContext,
): { summary: RunSummary; violations: Violation[] } {
  const tolerance = context.profile.timerToleranceMs;
  const calls = handlerCalls(lines, context.profile.jobs.leaseMs as number);
  const byJob = groupBy([...calls.values()], (call) => call.job);
  const violations: Violation[] = [
    ...overlappingCalls(byJob, lines, tolerance),
    ...limitBreaches([...calls.values()], lines, context),
    ...unsettledJobs(lines, finalRows, context),
    ...unexplainedCompletions(byJob, lines, finalRows),
    ...unbackedAttempts(calls, lines, finalRows, byJob),
    ...crashesAndSlowCloses(lines, context),
  ];
  return { summary: summarize(lines, calls, finalRows), violations: violations.map((v) => withNearbyFaults(v, lines)) };
}

/**
 * Adds to a violation's evidence the faults and kills that touched its processes shortly before or during it: worker
 * `w<i>.<n>` sits behind `proxy<i>`, and a lock id starts with its worker's id.
 */
function withNearbyFaults(violation: Violation, lines: HistoryLine[]): Violation {
  if (violation.evidence.length === 0) return violation;
  const processes = new Set<string>();
  for (const line of violation.evidence) {
    processes.add(line.p);
    if (typeof line.lock === 'string') processes.add(line.lock.slice(0, line.lock.lastIndexOf('#')));
  }
  const proxies = new Set([...processes].map((process) => `proxy${process.split('.')[0].slice(1)}`));
  const from = Math.min(...violation.evidence.map((line) => line.t)) - 1_500;
  const to = Math.max(...violation.evidence.map((line) => line.t));
  const nearby = lines.filter(
    (line) =>
      line.t >= from &&
      line.t <= to &&
      ((line.type === 'fault' && proxies.has(line.proxy as string)) ||
        ((line.type === 'kill' || line.type === 'exit') && processes.has(line.process as string))),
  );
  const evidence = [...new Set([...violation.evidence, ...nearby.slice(-8)])].sort((a, b) => a.t - b.t);
  return { ...violation, evidence };
}

function handlerCalls(lines: HistoryLine[], leaseMs: number): Map<string, HandlerCall> {
  const calls = new Map<string, HandlerCall>();
  const exits = new Map<string, number>();
  /** The latest call of each process, job and attempt: a `stale` event of that attempt is about it. */
  const byAttempt = new Map<string, HandlerCall>();
  for (const line of lines) {
    if (line.type === 'exit') exits.set(line.process as string, line.t);
    if (line.type === 'event' && line.event === 'stale') {
      // The library's record of a lost lease. A call aborted first for another reason (shutdown, a timeout) logs no
      // second abort when its lease then runs out: this event is the loss on record (long seed 4312).
      const call = byAttempt.get(`${line.p}|${line.job as string}|${line.attempt as number}`);
      if (call && call.end === undefined) {
        call.leaseLost = true;
        call.lossRecordedAt ??= line.t;
      }
      continue;
    }
    const id = line.call as string | undefined;
    if (id === undefined) continue;
    if (line.type === 'call-start') {
      calls.set(id, {
        call: id,
        job: line.job as string,
        name: line.name as string,
        lock: line.lock as string,
        attempt: line.attempt as number,
        process: line.p,
        group: (line.group as string | null) ?? null,
        start: line.t,
        leaseLost: false,
        ignoredSignal: false,
        deadline: line.deadline as number,
        deadlines: [{ t: line.t, deadline: line.deadline as number }],
        settledAt: Number.POSITIVE_INFINITY,
        liveUntil: Number.POSITIVE_INFINITY,
        lines: [line],
      });
      byAttempt.set(`${line.p}|${line.job as string}|${line.attempt as number}`, calls.get(id) as HandlerCall);
      continue;
    }
    const call = calls.get(id);
    if (!call) continue;
    call.lines.push(line);
    if (typeof line.deadline === 'number') {
      call.deadline = Math.max(call.deadline, line.deadline);
      call.deadlines.push({ t: line.t, deadline: line.deadline });
    }
    if (line.type === 'call-abort') {
      call.abortReason = line.reason as string;
      if (line.reason === 'LeaseLostError') call.leaseLost = true;
      if ((call.lines[0].ignore as boolean) === true) call.ignoredSignal = true;
      if (call.leaseLost || call.ignoredSignal) call.lossRecordedAt ??= line.t;
    }
    if (line.type === 'call-end') {
      call.end = line.t;
      call.how = line.how as HandlerCall['how'];
      call.leaseLost ||= line.leaseLost === true;
      call.ignoredSignal ||= line.ignoredSignal === true;
      if (call.leaseLost || call.ignoredSignal) call.lossRecordedAt ??= line.t;
    }
  }
  const cancels = successfulCancels(lines);
  const starts = new Map<string, number[]>();
  for (const call of calls.values()) starts.set(call.job, [...(starts.get(call.job) ?? []), call.start]);
  for (const call of calls.values()) {
    const exit = exits.get(call.process);
    if (call.end === undefined && exit !== undefined && exit >= call.start) call.exitedAt = exit;
    call.settledAt = call.end ?? call.exitedAt ?? Number.POSITIVE_INFINITY;
    // The row (and its slots) stay taken until that lease's deadline: a later owner may start then, not earlier.
    call.liveUntil = call.leaseLost || call.ignoredSignal ? Math.min(call.settledAt, call.deadline) : call.settledAt;
    // Cancelled while it ran, before any loss or abort of its own: the cancel's settle window applies (the guarantees'
    // "a cancelled job is never run twice at once"), even when the library reports the abort as a lost lease.
    const abortedAt = call.lines.find((line) => line.type === 'call-abort')?.t;
    const cancel = (cancels.get(call.job) ?? []).find(
      (asked) =>
        asked.at > call.start &&
        asked.at < call.settledAt &&
        (abortedAt === undefined || abortedAt >= asked.at) &&
        (call.lossRecordedAt === undefined || call.lossRecordedAt >= asked.at) &&
        // Another call of the job started since: the cancel may have hit that run, not this one.
        !(starts.get(call.job) ?? []).some((start) => start > call.start && start <= asked.at),
    );
    if (cancel) {
      call.cancelledAt = cancel.at;
      call.settleWindowEnd = deadlineAt(call, cancel.at) + leaseMs;
      call.liveUntil = Math.min(call.settledAt, call.settleWindowEnd);
    }
  }
  return calls;
}

/**
 * The cancels that landed, by job: when each was asked (the write landed between the ask and its answer `cancelled`).
 * Judged from the ask, the earliest it may have landed: the settle window it opens ends no later than the library's.
 */
function successfulCancels(lines: HistoryLine[]): Map<string, { at: number }[]> {
  const asked = new Map<string, HistoryLine>();
  const cancels = new Map<string, { at: number }[]>();
  for (const line of lines) {
    if (line.op !== 'cancel') continue;
    const key = `${line.p}/${line.opId}`;
    if (line.type === 'op') asked.set(key, line);
    const ask = asked.get(key);
    const answer = line.answer as { status?: string } | undefined;
    if (line.type !== 'op-answer' || !ask || line.ok !== true || answer?.status !== 'cancelled') continue;
    const job = (ask.args as { id?: string } | undefined)?.id;
    if (job === undefined) continue;
    cancels.set(job, [...(cancels.get(job) ?? []), { at: ask.t }]);
  }
  return cancels;
}

/**
 * Invariant 1: two calls of one job overlap only in the documented case: the earlier one's lease was lost (or it
 * ignored its aborted signal, so the library stopped renewing it), the later one started no earlier than the last
 * lease deadline the earlier one saw, and that loss was on record by then, give or take the timer tolerance (the
 * old owner's lease timer may fire that late).
 */
function overlappingCalls(byJob: Map<string, HandlerCall[]>, lines: HistoryLine[], tolerance: number): Violation[] {
  const violations: Violation[] = [];
  for (const [job, calls] of byJob) {
    const ordered = [...calls].sort((a, b) => a.start - b.start);
    for (let i = 0; i < ordered.length; i += 1) {
      for (let j = i + 1; j < ordered.length; j += 1) {
        const [first, second] = [ordered[i], ordered[j]];
        if (second.start >= first.settledAt) continue;
        const deadline = first.settleWindowEnd ?? deadlineAt(first, second.start);
        const documented =
          first.settleWindowEnd !== undefined
            ? second.start + tolerance >= first.settleWindowEnd
            : first.lossRecordedAt !== undefined &&
              first.lossRecordedAt <= second.start + tolerance &&
              second.start >= deadline;
        if (documented) continue;
        violations.push({
          invariant: 1,
          job,
          title: 'two live handler calls of one job overlap',
          detail:
            `${second.call} (lock ${second.lock}, attempt ${second.attempt}) started ${second.start - first.start} ms ` +
            `after ${first.call} (lock ${first.lock}, attempt ${first.attempt}), whose lease ran until ` +
            `${deadline - second.start} ms after that start and which was live until ${describeEnd(first)}; ` +
            (first.cancelledAt !== undefined
              ? `cancelled ${first.cancelledAt - first.start} ms after its start (settle window until its last deadline + one lease); `
              : '') +
            `lease lost: ${first.leaseLost}, signal ignored: ${first.ignoredSignal}` +
            (first.abortReason ? `, aborted by ${first.abortReason}` : ''),
          evidence: [
            ...first.lines,
            ...second.lines.slice(0, 1),
            ...jobContext(new Set([job]), lines, first.start - 2_000, second.start),
          ].sort((a, b) => a.t - b.t),
        });
        break;
      }
    }
  }
  return violations;
}

/** The latest lease deadline `call` had seen by `t`. */
function deadlineAt(call: HandlerCall, t: number): number {
  return Math.max(
    ...call.deadlines.filter((seen) => seen.t <= t).map((seen) => seen.deadline),
    call.deadlines[0].deadline,
  );
}

/** What other processes did to these jobs: cancels, retries and runNows asked, cancelled events, rows deleted. */
function jobContext(jobs: Set<string>, lines: HistoryLine[], from: number, to: number): HistoryLine[] {
  return lines.filter(
    (line) =>
      line.t >= from &&
      line.t <= to &&
      ((line.type === 'op' && jobs.has((line.args as { id?: string } | undefined)?.id as string)) ||
        (line.type === 'row-gone' && jobs.has(line.job as string)) ||
        (line.type === 'event' && line.event === 'cancelled' && jobs.has(line.job as string))),
  );
}

function describeEnd(call: HandlerCall): string {
  if (call.end !== undefined) return `it settled (${call.how}) ${call.end - call.start} ms after its start`;
  if (call.exitedAt !== undefined) return `its process exited ${call.exitedAt - call.start} ms after its start`;
  return 'the end of the run (it never settled)';
}

/** Invariant 2: `globalConcurrency`, `groupConcurrency` and `rateLimit` hold across the fleet. */
function limitBreaches(calls: HandlerCall[], lines: HistoryLine[], context: CheckContext): Violation[] {
  const violations: Violation[] = [];
  for (const { name, options } of context.names) {
    const ofName = calls.filter((call) => call.name === name);
    const global = options.globalConcurrency as number | undefined;
    if (global !== undefined) {
      violations.push(...overLimit(ofName, global, `globalConcurrency ${global} of ${name}`, lines));
    }
    const perGroup = options.groupConcurrency as number | undefined;
    if (perGroup !== undefined) {
      for (const [group, inGroup] of groupBy(ofName, (call) => String(call.group))) {
        violations.push(
          ...overLimit(inGroup, perGroup, `groupConcurrency ${perGroup} of ${name}, group ${group}`, lines),
        );
      }
    }
    const rate = options.rateLimit as { max: number; perMs: number } | undefined;
    if (rate !== undefined) {
      // A call starts when its claim's answer arrives, which a delayed reply makes late: the claim's own instant is
      // its first lease deadline minus the lease (the claim wrote now + leaseMs). The window is shortened by the timer
      // tolerance for the few ms between a token and its claim.
      const lease = (options.leaseMs as number | undefined) ?? (context.profile.jobs.leaseMs as number);
      const claimedAt = (call: HandlerCall) => call.deadlines[0].deadline - lease;
      const window = rate.perMs - context.profile.timerToleranceMs;
      const claims = [...ofName].sort((a, b) => claimedAt(a) - claimedAt(b));
      for (let i = 0; i + rate.max < claims.length; i += 1) {
        if (claimedAt(claims[i + rate.max]) - claimedAt(claims[i]) >= window) continue;
        const inWindow = claims.slice(i, i + rate.max + 1);
        violations.push({
          invariant: 2,
          title: `rateLimit ${rate.max} per ${rate.perMs} ms of ${name} exceeded`,
          detail: `${inWindow.length} claims within ${claimedAt(inWindow[inWindow.length - 1]) - claimedAt(inWindow[0])} ms`,
          evidence: inWindow.map((call) => call.lines[0]),
        });
        break;
      }
    }
  }
  return violations;
}

function overLimit(calls: HandlerCall[], limit: number, what: string, lines: HistoryLine[]): Violation[] {
  const edges = calls.flatMap((call) => [
    { t: call.start, delta: 1, call },
    { t: call.liveUntil, delta: -1, call },
  ]);
  // At the same instant an end frees the slot before a start takes it; a call that ends as it starts never counts.
  edges.sort((a, b) => a.t - b.t || a.delta - b.delta);
  const live = new Set<HandlerCall>();
  const ended = new Set<HandlerCall>();
  for (const edge of edges) {
    if (edge.delta < 0) {
      if (!live.delete(edge.call)) ended.add(edge.call);
      continue;
    }
    if (ended.has(edge.call)) continue;
    live.add(edge.call);
    if (live.size > limit) {
      return [
        {
          invariant: 2,
          title: `${what} exceeded`,
          detail: `${live.size} live calls at once: ${[...live].map((call) => `${call.call} (job ${call.job}, live until ${describeEnd(call)})`).join('; ')}`,
          evidence: [
            ...[...live].flatMap((call) =>
              call.lines.filter((line) => line.type !== 'call-note' && line.type !== 'call-lease'),
            ),
            ...jobContext(
              new Set([...live].map((call) => call.job)),
              lines,
              Math.min(...[...live].map((call) => call.start)) - 2_000,
              edge.t,
            ),
          ].sort((a, b) => a.t - b.t),
        },
      ];
    }
  }
  return [];
}

/**
 * Invariant 3: after the quiesce, every job is final (or pending with a name nobody handles), no running row is left,
 * no pending row holds a slot, no row that left pending holds a debounce key, and no row vanished (purge, sweep)
 * before it was final.
 */
function unsettledJobs(lines: HistoryLine[], finalRows: RowSnapshot[], context: CheckContext): Violation[] {
  const violations: Violation[] = [];
  const now = lines.find((line) => line.type === 'phase' && line.phase === 'final')?.t ?? Date.now();
  for (const row of finalRows) {
    const job = idOf(row);
    const history = lines.filter((line) => line.job === job).slice(-8);
    if (row.status === 'pending' && !context.orphanNames.includes(row.name)) {
      violations.push({
        invariant: 3,
        job,
        title: 'a job is still pending after the quiesce',
        detail: `${row.name}, due ${row.runAt ? `${row.runAt.getTime() - now} ms from the end` : '?'}, attempt count ${row.attemptCount}`,
        evidence: history,
      });
    }
    if (row.status === 'running') {
      const expired = row.lockedUntil !== undefined && row.lockedUntil.getTime() <= now;
      violations.push({
        invariant: 3,
        job,
        title: expired ? 'a running row with an expired lease remains' : 'a job is still running after the quiesce',
        detail: `${row.name} locked by ${row.lockedBy} until ${row.lockedUntil ? row.lockedUntil.getTime() - now : '?'} ms from the end`,
        evidence: history,
      });
    }
    if (row.status !== 'pending' && row.debounceScope !== undefined) {
      violations.push({
        invariant: 3,
        job,
        title: 'a row no longer pending still holds its debounce key',
        detail: `${row.name} (${row.status}): ${row.debounceScope}`,
        evidence: history,
      });
    }
    if (row.status === 'pending' && (row.concurrencySlot !== undefined || row.groupSlot !== undefined)) {
      violations.push({
        invariant: 3,
        job,
        title: 'a pending row holds a fleet slot',
        detail: `${row.name}: ${row.concurrencySlot ?? ''} ${row.groupSlot ?? ''}`,
        evidence: history,
      });
    }
  }
  const rowLines = lines.filter((line) => line.type === 'row');
  const callEnds = lines.filter((line) => line.type === 'call-end');
  const callLocks = new Map(lines.filter((line) => line.type === 'call-start').map((line) => [line.call, line.lock]));
  for (const gone of lines.filter((line) => line.type === 'row-gone')) {
    if (gone.lastStatus !== 'pending' && gone.lastStatus !== 'running') continue;
    const job = gone.job as string;
    const lastSeen = gone.lastSeen as number;
    // The owner seen last settled before the row went: its outcome write may have landed (its answer lost) and the
    // row been purged before the next snapshot.
    const lastLock = rowLines.filter((line) => line.job === job && line.t <= gone.t).pop()?.lock;
    const ownerSettled =
      lastLock !== undefined &&
      callEnds.some((line) => line.job === job && line.t <= gone.t && callLocks.get(line.call) === lastLock);
    // A row may go final and be deleted between two snapshots: a settle or an outcome event in between, or a cancel
    // or retry asked shortly before (its write may land after the snapshot that still saw the row open).
    const finishing =
      ownerSettled ||
      lines.some(
        (line) =>
          line.t <= gone.t &&
          ((line.t >= lastSeen - 5 && line.job === job && (line.type === 'call-end' || line.type === 'event')) ||
            (line.t >= lastSeen - 3_000 &&
              line.type === 'op' &&
              (line.args as { id?: string } | undefined)?.id === job)),
      );
    if (finishing) continue;
    violations.push({
      invariant: 3,
      job,
      title: 'a row was deleted before it was final',
      detail: `last seen ${gone.lastStatus} ${gone.t - lastSeen} ms before it was gone; nothing finished it in between`,
      evidence: [...lines.filter((line) => line.job === job && line.t <= gone.t + 2_000).slice(-8)],
    });
  }
  return violations;
}

/**
 * Invariant 4: a completed job has a handler call that resolved; a call after a completion that landed (its process
 * emitted `completed`) exists only after a retry, or when that call's lease was lost before the completion landed.
 */
function unexplainedCompletions(
  byJob: Map<string, HandlerCall[]>,
  lines: HistoryLine[],
  finalRows: RowSnapshot[],
): Violation[] {
  const violations: Violation[] = [];
  for (const row of finalRows) {
    if (row.status !== 'completed') continue;
    const job = idOf(row);
    const calls = byJob.get(job) ?? [];
    if (calls.some((call) => call.how === 'resolved')) continue;
    violations.push({
      invariant: 4,
      job,
      title: 'a completed job has no handler call that resolved',
      detail: `${calls.length} handler calls: ${calls.map((call) => `${call.call} ${call.how ?? 'unsettled'}`).join(', ') || 'none'}`,
      evidence: lines.filter((line) => line.job === job).slice(-10),
    });
  }
  const completedEvents = lines.filter((line) => line.type === 'event' && line.event === 'completed');
  const retries = lines.filter((line) => line.type === 'op' && line.op === 'retry');
  for (const [job, calls] of byJob) {
    for (const done of calls) {
      if (done.how !== 'resolved' || done.end === undefined) continue;
      const landed = completedEvents.find(
        (event) =>
          event.job === job && event.p === done.process && event.attempt === done.attempt && event.t >= done.start,
      );
      if (!landed) continue;
      const later = calls.find((call) => call.start > (done.end as number));
      if (!later) continue;
      const retried = retries.some(
        (retry) => (retry.args as { id?: string }).id === job && retry.t >= done.start && retry.t <= later.start,
      );
      if (retried || done.leaseLost) continue;
      violations.push({
        invariant: 4,
        job,
        title: 'a job ran again after its completion landed',
        detail: `${later.call} started ${later.start - landed.t} ms after ${done.process} emitted completed for ${done.call}; no retry in between`,
        evidence: [...done.lines, landed, later.lines[0]],
      });
    }
  }
  return violations;
}

/** How far from when a row was seen taken its owner's `stale` event for that attempt may be (longest lease + slack). */
const STALE_WINDOW_MS = 10_000;

/**
 * Invariant 5: an attempt recorded on a row is backed by a handler call or a recorded lease loss: a lock that held
 * the row `running` with no handler call under it, whose row then went on counting an attempt (reclaimed, or dead),
 * is allowed only when its worker was SIGKILLed or recorded that lease's loss (a `stale` event of that job and attempt:
 * a claim answered with its lease nearly gone, whose first renewal found the row reclaimed) or logged that it gave
 * up on that claim in doubt, or on handing it back at shutdown (cut off from the database for its lease and the
 * hand-back window, the documented case);
 * no job is dead with zero handler calls otherwise. The attempt is charged to the lock only when the count rose after it took the row.
 */
function unbackedAttempts(
  calls: Map<string, HandlerCall>,
  lines: HistoryLine[],
  finalRows: RowSnapshot[],
  byJob: Map<string, HandlerCall[]>,
): Violation[] {
  const violations: Violation[] = [];
  const locksWithCalls = new Set([...calls.values()].map((call) => call.lock));
  const killedAt = new Map<string, number>();
  for (const line of lines) {
    if (line.type === 'kill' && line.signal === 'SIGKILL') killedAt.set(line.process as string, line.t);
    if (line.type === 'exit' && line.signal === 'SIGKILL') killedAt.set(line.process as string, line.t);
  }
  const excused = (lock: string) => killedAt.has(lock.slice(0, lock.lastIndexOf('#')));
  // The documented give-up of a claim in doubt, logged by its worker for that lock, with the evidence for it: when
  // its hand-back answered "no row under it", the row was already someone else's (seen under another lock or
  // finished) by then; when no answer came at all, its connection was cut off around the claim (its reply faulted,
  // a cut or a black hole). A worker that was not cut off, or a hand-back that missed a row still under its lock,
  // has no excuse.
  const claimGivenUp = (job: string, lock: string, held: HistoryLine) => {
    // A claim it would not start (answered during shutdown, or for a name paused meanwhile) whose hand-back got no
    // answer (its worker cut off): the same documented case (long seeds 3905 and 4400).
    const handBackUnanswered = lines.some(
      (line) =>
        line.type === 'log' &&
        line.p === lock.slice(0, lock.lastIndexOf('#')) &&
        String(line.message).includes('handing back a claim') &&
        String(line.message).includes(`(lock ${lock}) got no answer in time`),
    );
    if (handBackUnanswered) return cutOffAround(job, lock, held.t, lines);
    const gaveUp = lines.find(
      (line) =>
        line.type === 'log' &&
        line.p === lock.slice(0, lock.lastIndexOf('#')) &&
        String(line.message).includes(`A claim (lock ${lock})`) &&
        String(line.message).includes('could not be read back before its lease ended'),
    );
    if (!gaveUp) return false;
    if (String(gaveUp.message).includes('no row was left under it')) {
      return lines.some(
        (line) =>
          line.type === 'row' &&
          line.job === job &&
          line.t > held.t &&
          line.t <= gaveUp.t + ROW_WATCH_SLACK_MS &&
          (line.lock !== lock || line.status !== 'running'),
      );
    }
    return cutOffAround(job, lock, held.t, lines);
  };
  // The lease loss the lock's own worker recorded for the attempt it claimed (its `stale` event), near the claim.
  const leaseLossRecorded = (job: string, lock: string, held: HistoryLine) =>
    lines.some(
      (line) =>
        line.type === 'event' &&
        line.event === 'stale' &&
        line.job === job &&
        line.p === lock.slice(0, lock.lastIndexOf('#')) &&
        line.attempt === Number(held.attemptCount ?? 0) + 1 &&
        line.t >= held.t - STALE_WINDOW_MS &&
        line.t <= held.t + STALE_WINDOW_MS,
    );
  const rowLines = groupBy(
    lines.filter((line) => line.type === 'row'),
    (line) => line.job as string,
  );
  for (const [job, changes] of rowLines) {
    for (let i = 0; i < changes.length; i += 1) {
      const held = changes[i];
      const lock = held.lock as string | undefined;
      if (held.status !== 'running' || lock === undefined || locksWithCalls.has(lock) || excused(lock)) continue;
      const next = changes[i + 1];
      // Handed back to pending (a claim in flight at shutdown) or cancelled: no attempt was charged for it.
      if (!next || next.status === 'pending' || next.status === 'cancelled' || next.lock === lock) continue;
      // No attempt was charged after this lock took the row: the count it held was the previous owner's (a reclaim
      // charges the lost attempt as it claims, then dead-letters the row when that was the last one).
      if (Number(next.attemptCount ?? 0) <= Number(held.attemptCount ?? 0)) continue;
      if (leaseLossRecorded(job, lock, held) || claimGivenUp(job, lock, held)) continue;
      violations.push({
        invariant: 5,
        job,
        title: 'an attempt was charged for a claim that ran no handler',
        detail: `${claimTrouble(job, lock, held.t, lines)}; lock ${lock} held the row running (attempt count ${held.attemptCount}) with no handler call under it and its worker was not killed; next the row was ${next.status}${next.lock ? ` under ${next.lock}` : ''} with attempt count ${next.attemptCount}`,
        evidence: [
          ...lines.filter((line) => line.job === job).slice(0, 12),
          ...faultsAround(lock, held.t, lines).filter((line) => line.job !== job),
        ].sort((a, b) => a.t - b.t),
      });
    }
  }
  for (const row of finalRows) {
    if (row.status !== 'dead') continue;
    const job = idOf(row);
    if ((byJob.get(job) ?? []).length > 0) continue;
    const locks = (rowLines.get(job) ?? []).map((line) => line.lock as string | undefined).filter(Boolean) as string[];
    if (locks.length > 0 && locks.every(excused)) continue;
    violations.push({
      invariant: 5,
      job,
      title: 'a job is dead with zero handler calls',
      detail: `${row.name}: attempts ${(row.attempts ?? []).map((attempt) => attempt.errorClass).join(', ')}; locks ${locks.join(', ') || 'none seen'}`,
      evidence: lines.filter((line) => line.job === job).slice(-10),
    });
  }
  return violations;
}

/** How long after a change the row watcher (every 150 ms) may record it. */
const ROW_WATCH_SLACK_MS = 300;

/**
 * Whether the connection of a lock's worker was cut off around its claim: the claim's own reply was faulted (lost,
 * or held and then cut), or its proxy cut or black-holed every connection, from 3 s before the row was seen taken to
 * 5 s after (a lease and the hand-back window).
 */
function cutOffAround(job: string, lock: string, seenAt: number, lines: HistoryLine[]): boolean {
  const proxy = `proxy${lock.slice(0, lock.lastIndexOf('#')).split('.')[0].slice(1)}`;
  return lines.some(
    (line) =>
      line.t >= seenAt - 3_000 &&
      line.t <= seenAt + 5_000 &&
      ((line.type === 'fault-reply' && line.job === job && line.kind === 'claim') ||
        (line.type === 'fault' && line.proxy === proxy && (line.fault === 'cut' || line.fault === 'blackhole'))),
  );
}

/** The faults of a lock's proxy, and the kills of its process, in the 3 s before a row was seen taken under it. */
function faultsAround(lock: string, seenAt: number, lines: HistoryLine[]): HistoryLine[] {
  const process = lock.slice(0, lock.lastIndexOf('#'));
  const proxy = `proxy${process.split('.')[0].slice(1)}`;
  return lines.filter(
    (line) =>
      line.t >= seenAt - 3_000 &&
      line.t <= seenAt + 300 &&
      ((line.type === 'fault' && line.proxy === proxy) || (line.type === 'kill' && line.process === process)),
  );
}

/**
 * What happened to a claim that ran no handler, for telling root causes apart: the fate of its faulted reply (the
 * proxy names the row a claim reply returned), else the proxy-wide faults around it, and whether its worker was
 * being stopped.
 */
function claimTrouble(job: string, lock: string, seenAt: number, lines: HistoryLine[]): string {
  const process = lock.slice(0, lock.lastIndexOf('#'));
  const stop = lines.find(
    (line) => line.type === 'kill' && line.process === process && line.t >= seenAt - 3_000 && line.t <= seenAt + 3_000,
  );
  // The proxy names the row a faulted claim reply returned: that claim's fate, exactly.
  const reply = lines.find(
    (line) =>
      line.type === 'fault-reply' &&
      line.job === job &&
      line.kind === 'claim' &&
      line.t >= seenAt - 3_000 &&
      line.t <= seenAt + 3_000,
  );
  const stopping = stop ? `; its worker got ${stop.signal} ${stop.t - seenAt} ms from when the row was seen taken` : '';
  if (reply?.fault === 'lose-reply') return `its claim landed and the reply was lost${stopping}`;
  if (reply && reply.delivered === false) {
    return `its claim's reply, held ${reply.ms} ms, was lost when the connection was cut${stopping}`;
  }
  if (reply) return `its claim's reply arrived ${reply.ms} ms late${stopping}`;
  const proxy = `proxy${process.split('.')[0].slice(1)}`;
  const proxyWide = lines.filter(
    (line) =>
      line.type === 'fault' &&
      line.proxy === proxy &&
      (line.fault === 'cut' || line.fault === 'blackhole') &&
      line.t >= seenAt - 3_000 &&
      line.t <= seenAt + 200,
  );
  const wide = proxyWide.map((line) => String(line.fault)).join(', ');
  return `no faulted reply names the claim${wide ? `; its proxy: ${wide}` : ''}${stopping}`;
}

/** Invariant 6: no process crashed or exited unexpectedly, and every `close()` returned within its bound. */
function crashesAndSlowCloses(lines: HistoryLine[], context: CheckContext): Violation[] {
  const violations: Violation[] = [];
  const bound = (context.profile.jobs.shutdownGraceMs as number) + 3_000 + CLOSE_SLACK_MS;
  const closeStarts = new Map<string, HistoryLine>();
  const stalls = lines.filter((line) => line.type === 'stall');
  for (const line of lines) {
    if (line.type === 'crash') {
      violations.push({
        invariant: 6,
        title: `a process crashed (${line.kind})`,
        detail: String(line.error),
        evidence: [line],
      });
    }
    if (line.type === 'exit' && line.expected === false) {
      violations.push({
        invariant: 6,
        title: 'a process exited on its own',
        detail: `${line.process} exited with code ${line.code}, signal ${line.signal}`,
        evidence: [line],
      });
    }
    if (line.type === 'close-start') closeStarts.set(line.p, line);
    if (line.type === 'close-end') {
      // The part of a close the whole machine stood still for (the runner's own stalls) is not the library's time.
      const frozen = stalledWithin(stalls, line.t - Number(line.ms), line.t);
      if (Number(line.ms) - frozen > bound) {
        violations.push({
          invariant: 6,
          title: 'close() exceeded its bound',
          detail: `${line.p}: ${line.ms} ms${frozen > 0 ? ` (${frozen} ms of it with the machine stalled)` : ''} against shutdownGraceMs + 3 s (+${CLOSE_SLACK_MS} ms slack) = ${bound} ms`,
          evidence: [closeStarts.get(line.p) as HistoryLine, line],
        });
      }
    }
    if (line.type === 'exit' && closeStarts.has(line.process as string)) {
      const start = closeStarts.get(line.process as string) as HistoryLine;
      const closed = lines.some((other) => other.type === 'close-end' && other.p === line.process);
      if (!closed && line.t - start.t - stalledWithin(stalls, start.t, line.t) > bound) {
        violations.push({
          invariant: 6,
          title: 'close() did not return within its bound',
          detail: `${line.process} was still closing ${line.t - start.t} ms after close() began (bound ${bound} ms)`,
          evidence: [start, line],
        });
      }
    }
  }
  return violations;
}

function summarize(lines: HistoryLine[], calls: Map<string, HandlerCall>, finalRows: RowSnapshot[]): RunSummary {
  const operations: Record<string, number> = {};
  const faults: Record<string, number> = {};
  const jobs = new Set<string>();
  const fired = new Map<unknown, string>();
  for (const line of lines) {
    if (line.type === 'trigger-fired') fired.set(line.trigger, line.label as string);
    if (line.type === 'op') operations[line.op as string] = (operations[line.op as string] ?? 0) + 1;
    if (line.type === 'fault') {
      const key = line.kind ? `${line.kind}:${line.fault}` : String(line.fault);
      faults[key] = (faults[key] ?? 0) + 1;
    }
    if (line.type === 'kill') faults[line.signal as string] = (faults[line.signal as string] ?? 0) + 1;
    if (line.type === 'row' || line.type === 'call-start') jobs.add(line.job as string);
  }
  const finalStatuses: Record<string, number> = {};
  for (const row of finalRows) finalStatuses[row.status] = (finalStatuses[row.status] ?? 0) + 1;
  const settled = lines.find((line) => line.type === 'phase' && line.phase === 'final')?.settled === true;
  const triggers: Record<string, number> = {};
  for (const label of fired.values()) triggers[label] = (triggers[label] ?? 0) + 1;
  return {
    operations,
    faults,
    handlerCalls: calls.size,
    triggers,
    jobs: jobs.size,
    finalStatuses,
    rowsSettled: settled,
  };
}

/** A violation as a few readable lines: the seed, the invariant, and the history that shows it (times relative). */
export function formatViolation(violation: Violation, seed: number): string {
  const origin = violation.evidence[0]?.t ?? 0;
  // Notes and lease moves repeat every few ms: the last lease line of each call says enough.
  const lastLease = new Map(
    violation.evidence.filter((line) => line.type === 'call-lease').map((line) => [line.call, line]),
  );
  const readable = violation.evidence.filter(
    (line) => line.type !== 'call-note' && (line.type !== 'call-lease' || lastLease.get(line.call) === line),
  );
  const shown = readable.slice(0, 20).map((line) => {
    const { t, p, type, ...rest } = line;
    const fields = Object.entries(rest)
      .filter(([key, value]) => value !== undefined && key !== 'job')
      .map(([key, value]) => `${key}=${typeof value === 'object' ? JSON.stringify(value) : String(value)}`)
      .join(' ');
    return `    +${String(t - origin).padStart(6)} ms  ${p.padEnd(8)} ${type.padEnd(11)} ${fields}`.slice(0, 220);
  });
  return [
    `seed ${seed} · invariant ${violation.invariant}: ${violation.title}${violation.job ? ` (job ${violation.job})` : ''}`,
    `  ${violation.detail}`,
    ...shown,
  ].join('\n');
}

function idOf(row: RowSnapshot): string {
  return typeof row._id === 'string' ? row._id : row._id.toHexString();
}

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k) ?? [];
    group.push(item);
    groups.set(k, group);
  }
  return groups;
}
