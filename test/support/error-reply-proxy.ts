import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import type { Document } from 'bson';
import { commandOf, framer, MORE_TO_COME, OP_MSG, parseOpMsg, replyTo } from './wire-messages';

/** The server error a rule answers with: `{ ok: 0, code, errmsg }` (no `code` at all when it is undefined). */
export interface InjectedError {
  code: number | undefined;
  codeName?: string;
  errmsg?: string;
}

/** "Answer the commands `match` picks with this error, `times` times" (then they pass through again). */
export interface ErrorReplyRule extends InjectedError {
  /** Sees each command as the server would (body plus document sequences, values promoted). */
  match: (command: Document) => boolean;
  /** @default 1 */
  times?: number;
}

/** A rule in force, and what it did so far. */
export interface ActiveErrorRule {
  /** Commands answered with the error so far. */
  readonly hits: number;
  /** Stops answering with the error (commands pass through again). */
  remove(): void;
}

interface RuleState {
  rule: ErrorReplyRule;
  left: number;
  hits: number;
}

/**
 * "Forward the commands `match` picks, `times` times, but not the server's answer": `lose` waits for the reply, drops
 * it and closes the client's connection (the write landed, its answer was lost: the driver sees a network error);
 * `delayMs` holds the reply that long before passing it on (a slow answer).
 */
export interface ReplyRule {
  match: (command: Document) => boolean;
  /** @default 1 */
  times?: number;
  /** Drop the reply and close the connection, or pass it on after `delayMs`. */
  action: { lose: true } | { delayMs: number };
}

/** A reply rule in force: `hits` counts commands forwarded under it, `answered` replies it dropped or delayed. */
export interface ActiveReplyRule extends ActiveErrorRule {
  /** Replies the server sent to matched commands so far (dropped or passed on late). */
  readonly answered: number;
}

interface ReplyRuleState {
  rule: ReplyRule;
  left: number;
  hits: number;
  answered: number;
}

/**
 * A wire-protocol proxy for fault tests: it forwards every message, except commands matched by an error rule, which it
 * answers itself with a server error reply and never sends on. The driver sees exactly what a server that refused the
 * command would answer (a `MongoServerError` with that code); the row is untouched. Reply rules (`interceptReply`)
 * forward the command and then lose or delay the server's answer: the write landed, the client does not know.
 */
export class ErrorReplyProxy {
  private readonly sockets = new Set<Socket>();
  private readonly rules: RuleState[] = [];
  private readonly replyRules: ReplyRuleState[] = [];
  /** Delayed replies not passed on yet (cleared by close()). */
  private readonly delayed = new Set<ReturnType<typeof setTimeout>>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  /** Listens on 127.0.0.1 on a free port and forwards to `targetUri`'s first host (`mongodb://host:port`). */
  static async start(targetUri: string): Promise<ErrorReplyProxy> {
    const match = /^mongodb:\/\/(?:[^@/]*@)?([^:/,]+):(\d+)/.exec(targetUri);
    if (!match) throw new Error(`ErrorReplyProxy needs a mongodb://host:port URI, got ${targetUri}`);
    const target = { host: match[1], port: Number(match[2]) };
    let proxy: ErrorReplyProxy | undefined;
    const server = createServer((client) => proxy?.accept(client, target));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('ErrorReplyProxy: no TCP address');
    proxy = new ErrorReplyProxy(server, address.port);
    return proxy;
  }

  /** Connection string through this proxy (`directConnection`, so the driver never bypasses it). */
  get uri(): string {
    return `mongodb://127.0.0.1:${this.port}/?directConnection=true`;
  }

  /** Answers the next `times` commands `match` picks with the error. Rules are tried in the order they were added. */
  answerWithError(rule: ErrorReplyRule): ActiveErrorRule {
    const state: RuleState = { rule, left: rule.times ?? 1, hits: 0 };
    this.rules.push(state);
    return {
      get hits() {
        return state.hits;
      },
      remove: () => {
        state.left = 0;
      },
    };
  }

  /**
   * Forwards the next `times` commands `match` picks and then drops or delays the server's reply (see `ReplyRule`).
   * Error rules are tried first: a command answered with an error never reaches the server.
   */
  interceptReply(rule: ReplyRule): ActiveReplyRule {
    const state: ReplyRuleState = { rule, left: rule.times ?? 1, hits: 0, answered: 0 };
    this.replyRules.push(state);
    return {
      get hits() {
        return state.hits;
      },
      get answered() {
        return state.answered;
      },
      remove: () => {
        state.left = 0;
      },
    };
  }

  async close(): Promise<void> {
    for (const timer of this.delayed) clearTimeout(timer);
    this.delayed.clear();
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, target: { host: string; port: number }): void {
    const upstream = tcpConnect(target.port, target.host);
    for (const socket of [client, upstream]) {
      socket.setNoDelay(true);
      this.sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        this.sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    /** Replies to intercept on this connection, by the request id they answer. */
    const intercepted = new Map<number, ReplyRuleState>();
    client.on(
      'data',
      framer((message) => {
        const answer = this.errorFor(message);
        if (answer) return void client.write(answer);
        const interception = this.replyRuleFor(message);
        if (interception) intercepted.set(message.readInt32LE(4), interception);
        upstream.write(message);
      }),
    );
    upstream.on(
      'data',
      framer((reply) => {
        const state = intercepted.get(reply.readInt32LE(8));
        if (!state) return void client.write(reply);
        intercepted.delete(reply.readInt32LE(8));
        state.answered += 1;
        const { action } = state.rule;
        // The server has done the work; the client never learns how it went.
        if ('lose' in action) client.destroy();
        else {
          const timer = setTimeout(() => {
            this.delayed.delete(timer);
            client.write(reply);
          }, action.delayMs);
          this.delayed.add(timer);
        }
      }),
    );
  }

  /** The reply rule a command falls under (and counts), or undefined. */
  private replyRuleFor(message: Buffer): ReplyRuleState | undefined {
    if (message.readInt32LE(12) !== OP_MSG || this.replyRules.every((state) => state.left === 0)) return undefined;
    if ((parseOpMsg(message).flags & MORE_TO_COME) !== 0) return undefined;
    const command = commandOf(message);
    const state = this.replyRules.find(({ rule, left }) => left > 0 && rule.match(command));
    if (!state) return undefined;
    state.left -= 1;
    state.hits += 1;
    return state;
  }

  /** The error reply for a command a rule picks (and counts), or undefined to forward it. */
  private errorFor(message: Buffer): Buffer | undefined {
    if (message.readInt32LE(12) !== OP_MSG || this.rules.every((state) => state.left === 0)) return undefined;
    // A fire-and-forget message gets no answer: never a candidate.
    if ((parseOpMsg(message).flags & MORE_TO_COME) !== 0) return undefined;
    const command = commandOf(message);
    const state = this.rules.find(({ rule, left }) => left > 0 && rule.match(command));
    if (!state) return undefined;
    state.left -= 1;
    state.hits += 1;
    const { code, codeName, errmsg } = state.rule;
    const reply: Document = { ok: 0, errmsg: errmsg ?? `injected by ErrorReplyProxy (code ${code ?? 'none'})` };
    if (code !== undefined) reply.code = code;
    if (codeName !== undefined) reply.codeName = codeName;
    return replyTo(message, reply);
  }
}

/** An `update` command of `collection` whose (first) update sets `status` to `status`: a job's finishing write. */
export function isStatusUpdate(command: Document, collection: string, status: string): boolean {
  const updates = command.updates as { u?: { $set?: { status?: unknown } } }[] | undefined;
  return command.update === collection && updates?.[0]?.u?.$set?.status === status;
}
