import type { Document } from 'mongodb';
import { connectTestClient } from './test-database';

/** Whether the test server can run multi-document transactions (and change streams), and why (not). */
export interface TransactionSupport {
  supported: boolean;
  /** One line for a skipped test's name or a log: what the server's hello said. */
  reason: string;
}

/**
 * Reads what the server says of itself, not what the URI claims: transactions (and change streams) need sessions
 * (`logicalSessionTimeoutMinutes` in hello) on a replica-set member (`setName`) or a router (`msg: 'isdbgrid'`, as
 * mongos and DocumentDB's gateway answer). `hello` first, `isMaster` for servers that do not know it.
 */
export function transactionSupport(hello: Document): TransactionSupport {
  const sessions = typeof hello.logicalSessionTimeoutMinutes === 'number';
  const topology =
    typeof hello.setName === 'string'
      ? `replica set "${hello.setName}"`
      : hello.msg === 'isdbgrid'
        ? 'a router (isdbgrid)'
        : undefined;
  if (topology && sessions) return { supported: true, reason: `${topology} with sessions` };
  const missing = [
    ...(topology ? [] : ['neither a replica set (setName) nor a router (isdbgrid)']),
    ...(sessions ? [] : ['no sessions (logicalSessionTimeoutMinutes)']),
  ];
  return { supported: false, reason: `the test server has ${missing.join(' and ')} in its hello` };
}

/** Asks the test server (MONGODB_URI or the one the harness started). */
export async function detectTransactionSupport(): Promise<TransactionSupport> {
  const client = await connectTestClient({ maxPoolSize: 1 });
  try {
    const admin = client.db('admin');
    const hello = await admin.command({ hello: 1 }).catch(() => admin.command({ isMaster: 1 }));
    return transactionSupport(hello);
  } finally {
    await client.close();
  }
}
