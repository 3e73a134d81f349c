import type { ClientSession } from 'mongoose';

interface Waiter {
  onCommit: () => void;
  onDrop: () => void;
  onCommitFailed: () => void;
}

/**
 * Per session: the callbacks waiting for its current transaction's fate. The driver emits no commit or abort event
 * (only 'ended'), and its transaction state says COMMITTED even after a failed commit, so the session's own
 * `commitTransaction`, `abortTransaction` and `startTransaction` are wrapped once, on that instance only:
 * `withTransaction` and mongoose's `connection.transaction()` call them there too.
 */
const HOOKS = new WeakMap<ClientSession, Waiter[]>();

/**
 * Runs `onCommit` once `session`'s current transaction has committed (its `commitTransaction` resolved), or `onDrop`
 * instead when that transaction is aborted, the session starts another one (a `withTransaction` retry: the writes
 * before it are gone) or ends without committing. A commit whose result stays unknown (it failed, and nobody retried
 * it until it succeeded) drops: an event must never announce a job that may not exist. `onCommitFailed` runs at
 * each failed commit, before anything else is known: the transaction may have committed anyway, so what concerns only
 * a job that exists must not wait for a caller who may keep the session open without retrying or ending it. Call it
 * only while `session.inTransaction()`.
 */
export function afterCommit(
  session: ClientSession,
  onCommit: () => void,
  onDrop: () => void,
  onCommitFailed: () => void,
): void {
  let waiters = HOOKS.get(session);
  if (!waiters) {
    waiters = [];
    HOOKS.set(session, waiters);
    hook(session, waiters);
  }
  waiters.push({ onCommit, onDrop, onCommitFailed });
}

function hook(session: ClientSession, waiters: Waiter[]): void {
  const run = (callback: () => void) => {
    try {
      callback();
    } catch {
      // Only our own announcements run here, and they isolate their subscribers; still, a commit that succeeded
      // must never look failed to the caller (withTransaction would retry it).
    }
  };
  const settle = (committed: boolean) => {
    for (const waiter of waiters.splice(0)) run(committed ? waiter.onCommit : waiter.onDrop);
  };
  const commit = session.commitTransaction;
  const abort = session.abortTransaction;
  const start = session.startTransaction;
  session.commitTransaction = async function commitTransaction(this: ClientSession, ...args) {
    try {
      await commit.apply(this, args);
    } catch (error) {
      for (const waiter of waiters) run(waiter.onCommitFailed);
      throw error;
    }
    settle(true);
  };
  session.abortTransaction = async function abortTransaction(this: ClientSession, ...args) {
    try {
      await abort.apply(this, args);
    } finally {
      settle(false);
    }
  };
  session.startTransaction = function startTransaction(this: ClientSession, ...args) {
    start.apply(this, args);
    settle(false);
  };
  session.on('ended', () => settle(false));
}
