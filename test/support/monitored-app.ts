import type { Connection } from 'mongoose';
import { createJobsTestApp, type JobsTestApp } from './jobs-app';

/** The driver timeouts of the chaos tests: a dead server is noticed within half a second. */
export const FAST_FAILING_DRIVER = { serverSelectionTimeoutMS: 500, heartbeatFrequencyMS: 500, connectTimeoutMS: 500 };

/**
 * An app (no worker) whose connection reports the name of every command it sends; through `uri` (a proxy) it fails
 * fast when the server is away.
 */
export async function monitoredApp(dbName: string, uri?: string): Promise<{ app: JobsTestApp; commands: string[] }> {
  const commands: string[] = [];
  const app = await createJobsTestApp({
    dbName,
    uri,
    options: { worker: false },
    mongoose: {
      ...(uri ? FAST_FAILING_DRIVER : {}),
      monitorCommands: true,
      connectionFactory: (connection: Connection) => {
        connection.getClient().on('commandStarted', (event) => commands.push(event.commandName));
        return connection;
      },
    },
  });
  return { app, commands };
}

/** Settles every promise and keeps each outcome (value or error), in order. */
export async function settleAll<T>(promises: Promise<T>[]): Promise<{ value?: T; error?: unknown }[]> {
  const settled = await Promise.allSettled(promises);
  return settled.map((s) => (s.status === 'fulfilled' ? { value: s.value } : { error: s.reason }));
}
