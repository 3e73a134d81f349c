import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { JobHandler } from '../../lib';
import { createBenchApp } from './bench-app';
import { sharedClockMs } from './helpers';

/**
 * Child process of the cross-process pickup scenario: a worker app polling every BENCH_POLL_MS. It reports, over
 * IPC, when each handler started on the machine-wide clock; the producer in the parent cannot wake its loop.
 */

export const PICKUP_JOB = 'bench.pickup';

export type PickupWorkerMessage =
  | { type: 'ready' }
  | { type: 'started'; seq: number; startedAt: number }
  | { type: 'clock'; at: number }
  | { type: 'stopped' };

export type PickupParentMessage = { type: 'clock' } | { type: 'stop' };

const send = (message: PickupWorkerMessage): void => {
  process.send?.(message);
};

@Injectable()
class RemotePickupProbe {
  @JobHandler(PICKUP_JOB)
  started(payload: { seq: number }): void {
    send({ type: 'started', seq: payload.seq, startedAt: sharedClockMs() });
  }
}

async function main(): Promise<void> {
  const uri = process.env.BENCH_URI;
  const dbName = process.env.BENCH_DB;
  if (!uri || !dbName) throw new Error('BENCH_URI and BENCH_DB must be set');
  const app = await createBenchApp(uri, dbName, { pollIntervalMs: Number(process.env.BENCH_POLL_MS), concurrency: 4 }, [
    RemotePickupProbe,
  ]);
  const stop = async () => {
    await app.close();
    send({ type: 'stopped' });
    process.exit(0);
  };
  process.on('message', (message: PickupParentMessage) => {
    if (message.type === 'clock') send({ type: 'clock', at: sharedClockMs() });
    if (message.type === 'stop') void stop();
  });
  // The parent died or closed the channel: never outlive it.
  process.on('disconnect', () => void stop());
  send({ type: 'ready' });
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
