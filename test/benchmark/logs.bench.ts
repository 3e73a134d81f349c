import { setImmediate as yieldToIo } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import { getConnectionToken } from '@nestjs/mongoose';
import type { CommandStartedEvent } from 'mongodb';
import type { Connection } from 'mongoose';
import { type JobExecutionContext, JobHandler, JobsService } from '../../lib';
import { type BenchContext, benchDbName, createBenchApp, dropDatabase } from './bench-app';
import { type BenchConfig, fmtInt, formatTable, log, medianOf, nowMs, withTimeout } from './helpers';

const JOB = 'bench.logs';
const LINES = 1_000;

/** How the handler logs its 1,000 lines. */
const SHAPES = {
  /** One synchronous loop: every line is logged before any write can start. */
  burst: async (ctx: JobExecutionContext) => {
    for (let i = 0; i < LINES; i++) ctx.log(`line ${i}`);
  },
  /** A line per event-loop turn with I/O between: as a handler that logs while it works. */
  spread: async (ctx: JobExecutionContext) => {
    for (let i = 0; i < LINES; i++) {
      ctx.log(`line ${i}`);
      await yieldToIo();
    }
  },
} as const;
type Shape = keyof typeof SHAPES;

export interface LogsRep {
  shape: Shape;
  /** Writes (renewals and the outcome) that carried lines. */
  writes: number;
  /** Every write command sent for the job while it ran (claims and reads excluded). */
  allWrites: number;
  elapsedMs: number;
  linesKept: number;
}

let shape: Shape = 'burst';

@Injectable()
class LogsProbe {
  @JobHandler(JOB)
  async run(_payload: unknown, ctx: JobExecutionContext): Promise<void> {
    await SHAPES[shape](ctx);
  }
}

/** Whether a write command's update(s) append lines. */
function carriesLines(event: CommandStartedEvent): boolean {
  const updates =
    event.commandName === 'update'
      ? ((event.command.updates ?? []) as { u?: Record<string, unknown> }[]).map((u) => u.u)
      : [event.command.update as Record<string, unknown> | undefined];
  return updates.some((update) => (update?.$push as Record<string, unknown> | undefined)?.logs !== undefined);
}

/** 1,000 `ctx.log` lines from one handler: how many writes carry them (lines ride renewals and the outcome). */
export async function runLogs(ctx: BenchContext, config: BenchConfig) {
  const dbName = benchDbName('logs');
  const app = await createBenchApp(ctx.uri, dbName, { concurrency: 1, pollIntervalMs: 50 }, [LogsProbe], {
    monitorCommands: true,
  });
  const reps: LogsRep[] = [];
  try {
    const jobs = app.get(JobsService);
    const client = app.get<Connection>(getConnectionToken()).getClient();
    let counting = false;
    let writes = 0;
    let allWrites = 0;
    client.on('commandStarted', (event: CommandStartedEvent) => {
      if (!counting || (event.commandName !== 'update' && event.commandName !== 'findAndModify')) return;
      if (event.commandName === 'findAndModify' && (event.command.query as { status?: unknown })?.status === 'pending')
        return; // the claim
      allWrites += 1;
      if (carriesLines(event)) writes += 1;
    });
    for (let rep = 1; rep <= config.repetitions; rep += 1) {
      for (const next of Object.keys(SHAPES) as Shape[]) {
        log(`logs rep ${rep}/${config.repetitions}: ${LINES} lines, ${next}`);
        shape = next;
        writes = 0;
        allWrites = 0;
        counting = true;
        const started = nowMs();
        const job = await jobs.enqueue(JOB, {});
        const finished = await withTimeout(jobs.waitUntilFinished(job.id, { timeoutMs: 60_000 }), 60_000, 'logs job');
        counting = false;
        reps.push({ shape: next, writes, allWrites, elapsedMs: nowMs() - started, linesKept: finished.logs.length });
      }
    }
  } finally {
    await app.close();
    await dropDatabase(ctx.client.db(dbName));
  }
  const of = (which: Shape) => reps.filter((r) => r.shape === which);
  const table = formatTable(
    `Logs: ${fmtInt(LINES)} ctx.log lines from one handler (medians of ${config.repetitions} reps)`,
    ['how the handler logs', 'writes carrying lines', 'all writes of the job', 'job ms', 'lines kept'],
    (Object.keys(SHAPES) as Shape[]).map((which) => [
      which === 'burst' ? 'one synchronous loop' : 'one line per event-loop turn',
      fmtInt(medianOf(of(which), (r) => r.writes)),
      fmtInt(medianOf(of(which), (r) => r.allWrites)),
      fmtInt(medianOf(of(which), (r) => r.elapsedMs)),
      fmtInt(medianOf(of(which), (r) => r.linesKept)),
    ]),
  );
  return { reps, table };
}
