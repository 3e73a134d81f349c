// The driver of the generative fault checker: random operations against JobsService, drawn from one seed, each
// recorded with its answer. Loaded by torture-process.cjs in the `driver` role.
'use strict';

const { createPrng } = require('./prng.cjs');

const FINAL_STATUSES = ['completed', 'dead', 'failed', 'cancelled'];

/**
 * What a job's handler does (see `work` in torture-process.cjs), drawn per job: mostly quick, some slow (longer
 * than a heartbeat, some longer than the lease), some failing, some ignoring their signal or settling late.
 */
function drawPayload(random, config) {
  const lease = config.leaseMs;
  const shape = random.weighted({ quick: 5, slow: 3, failing: 2, ignoring: 1, lateSettling: 1 });
  const payload = { shape };
  if (shape === 'quick') payload.ms = random.int(0, 60);
  else payload.ms = random.int(Math.floor(lease / 4), Math.floor(lease * 1.6));
  if (shape === 'failing') payload.fail = random.chance(0.5) ? 'always' : random.int(2, 3);
  if (shape === 'ignoring') payload.ignore = true;
  // Honours its signal, but takes most of a lease to wind down: inside the settle window the library gives it.
  if (shape === 'lateSettling') payload.settleMs = random.int(Math.floor(lease * 0.3), Math.floor(lease * 0.7));
  if (shape !== 'quick' && random.chance(0.3)) payload.extendMs = random.int(lease, lease * 2);
  if (shape !== 'quick' && random.chance(0.3)) payload.progress = true;
  // ctx.log lines at the start: past 50, the lease writes them in a renewal of their own.
  if (random.chance(0.3)) payload.log = random.int(1, 80);
  return payload;
}

function drawEnqueue(random, config) {
  const spec = random.pick(config.names);
  const payload = drawPayload(random, config);
  const options = {};
  if (spec.grouped) {
    payload.group = random.pick(config.groups);
    options.group = payload.group;
  }
  // At most one kind of key: dedupe (live jobs), throttle (a window, kept after the job ends) or debounce (pending).
  // A build under test without throttle or debounce (an older library) never draws them.
  const features = config.features ?? {};
  const key = random.weighted({
    none: 6,
    dedupe: 2,
    throttle: features.throttle === false ? 0 : 1,
    debounce: features.debounce === false ? 0 : 1,
  });
  if (key === 'dedupe') options.dedupeKey = `k${random.int(0, 5)}`;
  if (key === 'throttle') options.throttle = { key: `t${random.int(0, 3)}`, windowMs: random.int(200, 2000) };
  if (key === 'debounce') {
    // A replacement changes the payload, never the row's group: per group, so the payload's group (what the handler
    // reports, and invariant 2 counts by) stays the row's.
    const scope = spec.grouped ? `:${payload.group}` : '';
    options.debounce = { key: `d${random.int(0, 3)}${scope}`, windowMs: random.int(20, 600) };
    if (random.chance(0.5)) options.debounce.maxWaitMs = random.int(100, 1200);
  }
  // A debounced job's runAt is the window's end.
  if (key !== 'debounce' && random.chance(0.2)) options.delayMs = random.int(50, 1500);
  if (random.chance(0.3)) options.priority = random.int(-2, 2);
  return { name: spec.name, payload, options };
}

/** Starts the operations; `stop()` stops drawing new ones and resolves when those in flight have answered. */
function runDriver(jobs, record, config) {
  const random = createPrng(config.seed);
  const known = [];
  const inFlight = new Set();
  let stopped = false;
  let opSeq = 0;

  const operations = {
    enqueue: () => {
      const { name, payload, options } = drawEnqueue(random, config);
      return ['enqueue', { name, options, shape: payload.shape }, () => jobs.enqueue(name, payload, options)];
    },
    enqueueMany: () => {
      const items = Array.from({ length: random.int(2, 5) }, () => drawEnqueue(random, config));
      return ['enqueueMany', { names: items.map((item) => item.name) }, () => jobs.enqueueMany(items)];
    },
    cancel: () => {
      const id = random.pick(known);
      return ['cancel', { id }, () => jobs.cancel(id)];
    },
    retry: () => {
      const id = random.pick(known);
      return ['retry', { id }, () => jobs.retry(id)];
    },
    runNow: () => {
      const id = random.pick(known);
      return ['runNow', { id }, () => jobs.runNow(id)];
    },
    purge: () => {
      const options = { status: random.pick(FINAL_STATUSES) };
      if (random.chance(0.5)) options.finishedBefore = new Date(Date.now() - random.int(0, 2000));
      return ['purge', options, () => jobs.purge(options)];
    },
    // Fleet-wide pauses: every name is resumed when the driver stops, so that the quiesce can run what they held back.
    pause: () => {
      const name = random.pick(config.names).name;
      return ['pause', { name }, () => jobs.pause(name)];
    },
    resume: () => {
      const name = random.pick(config.names).name;
      return ['resume', { name }, () => jobs.resume(name)];
    },
    drain: () => {
      const names = [random.pick(config.names).name];
      const timeoutMs = random.int(200, 1500);
      return ['drain', { names, timeoutMs }, () => jobs.drain({ names, timeoutMs })];
    },
  };

  const answerOf = (result) => {
    if (result === undefined || result === null) return { value: result ?? null };
    if (typeof result === 'number') return { value: result };
    if (Array.isArray(result)) return { jobs: result.map((job) => ({ id: job.id, status: job.status })) };
    if (result.kind) return { kind: result.kind, reason: result.reason, status: result.job?.status };
    return { id: result.id, status: result.status, deduplicated: result.deduplicated };
  };

  /** Performs one operation, recorded with its answer; resolves when it answered. */
  const execute = (op, args, call) => {
    opSeq += 1;
    const id = opSeq;
    record({ type: 'op', op, opId: id, args });
    return Promise.resolve()
      .then(call)
      .then(
        (result) => {
          const answer = answerOf(result);
          if (answer.id && !answer.deduplicated) known.push(answer.id);
          for (const job of answer.jobs ?? []) known.push(job.id);
          record({ type: 'op-answer', op, opId: id, ok: true, answer });
        },
        (error) => record({ type: 'op-answer', op, opId: id, ok: false, error: error?.name, message: error?.message }),
      );
  };

  const track = (running) => {
    inFlight.add(running);
    void running.finally(() => inFlight.delete(running));
  };

  const paused = config.features?.pause === false;
  const perform = () => {
    const weights = { ...config.weights };
    if (known.length === 0) for (const op of ['cancel', 'retry', 'runNow']) weights[op] = 0;
    if (paused) for (const op of ['pause', 'resume']) weights[op] = 0;
    const [op, args, call] = operations[random.weighted(weights)]();
    track(execute(op, args, call));
  };

  /**
   * The operations of a state-keyed trigger (test/torture/triggers.ts) the runner fired on a handler start, one after
   * the other: cancel, purge the cancelled rows, retry, runNow, enqueue a sibling of the same name and group.
   */
  const triggered = {
    cancel: ({ job }) => ['cancel', { id: job }, () => jobs.cancel(job)],
    retry: ({ job }) => ['retry', { id: job }, () => jobs.retry(job)],
    runNow: ({ job }) => ['runNow', { id: job }, () => jobs.runNow(job)],
    'purge-cancelled': () => ['purge', { status: 'cancelled' }, () => jobs.purge({ status: 'cancelled' })],
    'enqueue-sibling': ({ name, group, sibling, siblings = 1, priority }) => {
      const payload = { ...sibling, ...(group && { group }) };
      const options = { ...(group && { group }), ...(priority !== undefined && { priority }) };
      if (siblings === 1) {
        return ['enqueue', { name, options, shape: sibling.shape }, () => jobs.enqueue(name, payload, options)];
      }
      const items = Array.from({ length: siblings }, () => ({ name, payload, options }));
      return ['enqueueMany', { names: items.map((item) => item.name) }, () => jobs.enqueueMany(items)];
    },
  };
  const trigger = (message) => {
    if (stopped) return;
    track(
      (async () => {
        for (const action of message.actions) {
          const [op, args, call] = triggered[action](message);
          await execute(op, { ...args, trigger: message.id }, call);
        }
      })(),
    );
  };

  /** A planted trigger's job (test/torture/triggers.ts): enqueued as the runner arms the trigger, due now. */
  const plant = ({ id, name, group, payload, priority }) => {
    if (stopped) return;
    const options = { ...(group && { group }), ...(priority !== undefined && { priority }) };
    track(
      execute('enqueue', { name, options, shape: payload.shape, trigger: id }, () =>
        jobs.enqueue(name, payload, options),
      ),
    );
  };

  const loop = (async () => {
    while (!stopped) {
      if (inFlight.size < config.maxInFlight) perform();
      await new Promise((resolve) => setTimeout(resolve, random.int(1, config.opIntervalMs * 2)));
    }
  })();

  return {
    trigger,
    plant,
    stop: async () => {
      stopped = true;
      await loop;
      await Promise.allSettled([...inFlight]);
      if (paused) return;
      // Nothing stays paused past the workload: the quiesce must see every job run (a failed resume is retried).
      for (const { name } of config.names) {
        for (let tries = 0; tries < 20; tries += 1) {
          opSeq += 1;
          const opId = opSeq;
          record({ type: 'op', op: 'resume', opId, args: { name, final: true } });
          const answer = await jobs.resume(name).then(
            (value) => ({ type: 'op-answer', op: 'resume', opId, ok: true, answer: { value } }),
            (error) => ({ type: 'op-answer', op: 'resume', opId, ok: false, error: error?.name }),
          );
          record(answer);
          if (answer.ok) break;
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      }
    },
  };
}

module.exports = { runDriver };
