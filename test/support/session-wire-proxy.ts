import type { Server, Socket } from 'node:net';
import { type Binary, type Document, deserialize, type Long, serialize } from 'bson';
import {
  connectUpstream,
  listenOnLoopback,
  type ProxyTarget,
  pairSockets,
  proxyTarget,
  uriThroughProxy,
} from './proxy-target';
import {
  buildOpMsg,
  EXACT,
  framer,
  HEADER_BYTES,
  MORE_TO_COME,
  OP_MSG,
  OP_REPLY,
  parseOpMsg,
  replyTo,
} from './wire-messages';
/** The fields by which a command joins a session and its transaction. */
export const SESSION_FIELDS = ['lsid', 'txnNumber', 'startTransaction', 'autocommit'] as const;
/** Commands the proxy answers itself with `ok: 1`: a server without transactions (or sessions) would refuse them. */
const ANSWERED_HERE = new Set(['commitTransaction', 'abortTransaction', 'endSessions']);

/** One command the client sent, with the session fields it carried (absent fields are undefined). */
export interface RecordedCommand {
  /** The command's name (its first key), e.g. `insert`, `findAndModify`, `commitTransaction`. */
  name: string;
  /** The collection it targets, when its first value is one. */
  collection?: string;
  /** The session id (`lsid.id`) as hex. */
  lsid?: string;
  txnNumber?: number;
  startTransaction?: boolean;
  autocommit?: boolean;
  /** Answered by the proxy itself (commit, abort, endSessions), never sent to the server. */
  answeredByProxy: boolean;
}

export interface SessionWireProxyOptions {
  /**
   * Remove the session fields before forwarding, for a server that rejects them. The in-memory Java test server
   * ignores them (checked), so by default they go through unchanged. @default false
   */
  stripSessionFields?: boolean;
}

/**
 * A wire-protocol proxy that makes a server without sessions look like one that has them, for tests of session
 * plumbing: it adds `logicalSessionTimeoutMinutes: 30` to every hello/isMaster reply (so the driver accepts a
 * `ClientSession`), records the session fields of every OP_MSG command (and strips them before they reach the server
 * when asked), and answers `commitTransaction`/`abortTransaction`/`endSessions` itself with `ok: 1`.
 * It proves which session a command travelled in, never that a server kept it atomic: nothing is rolled back.
 */
export class SessionWireProxy {
  /** Every command sent through the proxy, in order. */
  readonly commands: RecordedCommand[] = [];
  private readonly sockets = new Set<Socket>();
  /** Error labels of the next commits to fail, one entry per commit. */
  private readonly failingCommits: string[][] = [];

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly targetUri: string,
  ) {}

  static async start(targetUri: string, options: SessionWireProxyOptions = {}): Promise<SessionWireProxy> {
    const target = proxyTarget(targetUri, 'SessionWireProxy');
    const strip = options.stripSessionFields ?? false;
    let proxy: SessionWireProxy | undefined;
    const { server, port } = await listenOnLoopback('SessionWireProxy', (client) =>
      proxy?.accept(client, target, strip),
    );
    proxy = new SessionWireProxy(server, port, targetUri);
    return proxy;
  }

  /**
   * Connection string through this proxy (`directConnection`, so the driver never bypasses it), with the target URI's
   * credentials and options (see `uriThroughProxy`).
   */
  get uri(): string {
    return uriThroughProxy(this.targetUri, this.port);
  }

  /**
   * Fails the next commit with a WriteConflict carrying `errorLabels` (e.g. `TransientTransactionError`, which makes
   * `withTransaction` run the whole callback again, or `UnknownTransactionCommitResult`, which makes it retry the
   * commit). Each call fails one more commit.
   */
  failNextCommit(errorLabels: string[]): void {
    this.failingCommits.push(errorLabels);
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, target: ProxyTarget, strip: boolean): void {
    const upstream = connectUpstream(target);
    pairSockets(client, upstream, this.sockets);
    client.on(
      'data',
      framer((message) => {
        const reply = this.fromClient(message, strip);
        if (reply.answer) client.write(reply.answer);
        else upstream.write(reply.forward as Buffer);
      }),
    );
    upstream.on(
      'data',
      framer((message) => client.write(advertiseSessions(message))),
    );
  }

  /** Records an OP_MSG command; forwards it (stripped) or answers it here. Other opcodes pass unchanged. */
  private fromClient(message: Buffer, strip: boolean): { forward?: Buffer; answer?: Buffer } {
    if (message.readInt32LE(12) !== OP_MSG) return { forward: message };
    const msg = parseOpMsg(message);
    const name = Object.keys(msg.body)[0];
    const answeredByProxy = ANSWERED_HERE.has(name);
    this.commands.push(record(name, msg.body, answeredByProxy));
    if (answeredByProxy) {
      if ((msg.flags & MORE_TO_COME) !== 0) return { answer: Buffer.alloc(0) };
      const labels = name === 'commitTransaction' ? this.failingCommits.shift() : undefined;
      return { answer: replyTo(message, labels ? writeConflict(labels) : { ok: 1 }) };
    }
    if (!strip || !SESSION_FIELDS.some((field) => field in msg.body)) return { forward: message };
    for (const field of SESSION_FIELDS) delete msg.body[field];
    return { forward: buildOpMsg(message, msg.flags, msg.body, msg.rest) };
  }
}

function writeConflict(errorLabels: string[]): Document {
  return { ok: 0, errmsg: 'injected by SessionWireProxy', code: 112, codeName: 'WriteConflict', errorLabels };
}

/** A hello/isMaster reply (the only reply carrying `maxWireVersion`) with `logicalSessionTimeoutMinutes` added. */
function advertiseSessions(message: Buffer): Buffer {
  const opCode = message.readInt32LE(12);
  if (opCode === OP_MSG) {
    const msg = parseOpMsg(message);
    if (!('maxWireVersion' in msg.body)) return message;
    return buildOpMsg(message, msg.flags, withSessions(msg.body), msg.rest);
  }
  if (opCode === OP_REPLY && message.readInt32LE(HEADER_BYTES + 16) === 1) {
    const at = HEADER_BYTES + 20;
    const doc = deserialize(message.subarray(at), EXACT);
    if (!('maxWireVersion' in doc)) return message;
    const reply = Buffer.concat([message.subarray(0, at), Buffer.from(serialize(withSessions(doc)))]);
    reply.writeInt32LE(reply.length, 0);
    return reply;
  }
  return message;
}

function withSessions(hello: Document): Document {
  return { ...hello, logicalSessionTimeoutMinutes: 30 };
}

function record(name: string, body: Document, answeredByProxy: boolean): RecordedCommand {
  const target = body[name];
  const lsid = body.lsid as { id?: Binary } | undefined;
  const txnNumber = body.txnNumber as Long | undefined;
  return {
    name,
    collection: typeof target === 'string' ? target : undefined,
    lsid: lsid?.id ? Buffer.from(lsid.id.buffer).toString('hex') : undefined,
    txnNumber: typeof txnNumber === 'object' ? txnNumber.toNumber() : txnNumber,
    startTransaction: flag(body.startTransaction),
    autocommit: flag(body.autocommit),
    answeredByProxy,
  };
}

/** A boolean field as a boolean (absent → undefined). */
function flag(value: unknown): boolean | undefined {
  return value === undefined ? undefined : Boolean(value);
}
