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

/**
 * One line for the harness's log: the server's version and topology as it answers them, and whether the replica-set
 * tests (`*.replset.spec.ts`) run on it, so a CI job's log shows that it ran on the server its name says.
 */
export function serverSummary(buildInfo: Document, hello: Document): string {
  const version = typeof buildInfo.version === 'string' ? `MongoDB ${buildInfo.version}` : 'no version in buildInfo';
  const primary = (hello.isWritablePrimary ?? hello.ismaster) === true;
  const topology =
    typeof hello.setName === 'string'
      ? `replica set "${hello.setName}" ${primary ? 'primary' : 'member (not primary)'}`
      : hello.msg === 'isdbgrid'
        ? 'router (isdbgrid)'
        : hello.isreplicaset === true
          ? 'started with --replSet but not initiated (no rs.initiate())'
          : 'standalone';
  const transactions = transactionSupport(hello).supported
    ? 'transactions: the replica-set tests run'
    : 'no transactions: the replica-set tests are skipped';
  return `${version}, ${topology}; ${transactions}`;
}

/** `serverSummary` of the test server. */
export async function describeTestServer(): Promise<string> {
  const client = await connectTestClient({ maxPoolSize: 1 });
  try {
    const admin = client.db('admin');
    const hello = await admin.command({ hello: 1 }).catch(() => admin.command({ isMaster: 1 }));
    return serverSummary(await admin.command({ buildInfo: 1 }), hello);
  } finally {
    await client.close();
  }
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
