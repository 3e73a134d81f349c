import type { Server, Socket } from 'node:net';
import type { Document } from 'bson';
import {
  connectUpstream,
  listenOnLoopback,
  type ProxyTarget,
  pairSockets,
  proxyTarget,
  uriThroughProxy,
} from './proxy-target';
import { asReplicaSetPrimary, isHelloRequest } from './replica-set-hello';
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

/** "Forward the commands `match` picks, but hold their server's answer back (`ms`, or `until`), `times` times". */
export interface DelayedReplyRule {
  /** Sees each command as the server would (body plus document sequences, values promoted). */
  match: (command: Document) => boolean;
  /** How long the answer is held after it arrived from the server. */
  ms?: number;
  /** Holds the answer until this settles (a condition the test waits for), instead of for `ms`. */
  until?: Promise<unknown>;
  /** @default 1 */
  times?: number;
}

/**
 * "Forward the commands `match` picks, `times` times, but not the server's answer": `lose` waits for the reply, drops
 * it and closes the client's connection (the write landed, its answer was lost: the driver sees a network error);
 * `delayMs` holds the reply that long before passing it on (a slow answer).
 */
export interface ReplyRule {
  /** Sees each command as the server would (body plus document sequences, values promoted). */
  match: (command: Document) => boolean;
  /** @default 1 */
  times?: number;
  /** Drop the reply and close the connection (`afterMs` after it arrived, or at once), or pass it on after `delayMs`. */
  action: { lose: true; afterMs?: number } | { delayMs: number };
  /** Called as each matched command's answer arrives from the server (the write has landed), before its fate. */
  onAnswer?: () => void;
}

/** A reply rule in force: `hits` counts commands forwarded under it, `answered` replies it dropped or delayed. */
export interface ActiveReplyRule extends ActiveErrorRule {
  /** Replies the server sent to matched commands so far (dropped or passed on late). */
  readonly answered: number;
}

/** What becomes of a matched command's answer: held until `wait` settles (if given), then passed on or lost. */
interface ReplyFate {
  wait?: () => Promise<unknown>;
  lose?: true;
}

interface ReplyRuleState {
  match: (command: Document) => boolean;
  fate: ReplyFate;
  onAnswer?: () => void;
  left: number;
  hits: number;
  answered: number;
}

interface RuleState {
  rule: ErrorReplyRule;
  left: number;
  hits: number;
}

/**
 * A wire-protocol proxy for fault tests: it forwards every message, except commands matched by a rule, which it
 * answers itself with a server error reply and never sends on. The driver sees exactly what a server that refused the
 * command would answer (a `MongoServerError` with that code); the row is untouched. Reply rules (`delayReply`,
 * `interceptReply`) let the command through and then hold back or lose only its answer: the write lands, and the
 * driver learns it late or never.
 */
export class ErrorReplyProxy {
  private readonly sockets = new Set<Socket>();
  private readonly rules: RuleState[] = [];
  private readonly replyRules: ReplyRuleState[] = [];
  /** Set by `presentAsReplicaSetPrimary`: the set every hello answer names. */
  private replicaSetName?: string;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly targetUri: string,
  ) {}

  /** Listens on 127.0.0.1 on a free port and forwards to `targetUri`'s first host (`mongodb://host:port`). */
  static async start(targetUri: string): Promise<ErrorReplyProxy> {
    const target = proxyTarget(targetUri, 'ErrorReplyProxy');
    let proxy: ErrorReplyProxy | undefined;
    const { server, port } = await listenOnLoopback('ErrorReplyProxy', (client) => proxy?.accept(client, target));
    proxy = new ErrorReplyProxy(server, port, targetUri);
    return proxy;
  }

  /**
   * Connection string through this proxy (`directConnection`, so the driver never bypasses it), with the target URI's
   * credentials and options (see `uriThroughProxy`).
   */
  get uri(): string {
    return uriThroughProxy(this.targetUri, this.port);
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
   * Forwards the next `times` commands `match` picks, and passes on each one's answer `ms` after the server sent it, or
   * once `until` settles (later answers on that connection wait behind it, as on a slow link). The command itself is
   * not delayed.
   */
  delayReply(rule: DelayedReplyRule): ActiveReplyRule {
    const { ms, until } = rule;
    return this.addReplyRule(rule.match, rule.times, { wait: () => until ?? sleep(ms ?? 0) });
  }

  /**
   * Forwards the next `times` commands `match` picks and then drops or delays the server's reply (see `ReplyRule`).
   * Error rules are tried first: a command answered with an error never reaches the server.
   */
  interceptReply(rule: ReplyRule): ActiveReplyRule {
    const { action } = rule;
    const fate: ReplyFate =
      'lose' in action
        ? { lose: true, ...(action.afterMs !== undefined && { wait: () => sleep(action.afterMs ?? 0) }) }
        : { wait: () => sleep(action.delayMs) };
    return this.addReplyRule(rule.match, rule.times, fate, rule.onAnswer);
  }

  /**
   * From now on, answers every hello as a replica-set primary named `setName` that takes sessions would (see
   * `asReplicaSetPrimary`), so that the driver sends retryable writes through this proxy, to a server that has none.
   */
  presentAsReplicaSetPrimary(setName = 'rs0'): void {
    this.replicaSetName = setName;
  }

  private addReplyRule(
    match: ReplyRuleState['match'],
    times = 1,
    fate: ReplyFate,
    onAnswer?: () => void,
  ): ActiveReplyRule {
    const state: ReplyRuleState = { match, fate, onAnswer, left: times, hits: 0, answered: 0 };
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
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, target: ProxyTarget): void {
    const upstream = connectUpstream(target);
    pairSockets(client, upstream, this.sockets);
    /** Request ids on this connection whose answer is held back or lost, by the rule that picked them. */
    const intercepted = new Map<number, ReplyRuleState>();
    /** Request ids of hellos whose answer is to be rewritten (`presentAsReplicaSetPrimary`). */
    const hellos = new Set<number>();
    client.on(
      'data',
      framer((message) => {
        if (this.replicaSetName !== undefined && isHelloRequest(message)) hellos.add(message.readInt32LE(4));
        const answer = this.errorFor(message);
        if (answer) {
          client.write(answer);
          return;
        }
        const rule = this.replyRuleFor(message);
        if (rule !== undefined) intercepted.set(message.readInt32LE(4), rule);
        upstream.write(message);
      }),
    );
    // Answers leave in the order they came: one held back holds back those behind it.
    let outgoing = settled;
    upstream.on(
      'data',
      framer((answer) => {
        const responseTo = answer.readInt32LE(8);
        const message =
          hellos.delete(responseTo) && this.replicaSetName !== undefined
            ? asReplicaSetPrimary(answer, this.replicaSetName, `127.0.0.1:${this.port}`)
            : answer;
        const rule = intercepted.get(responseTo);
        intercepted.delete(responseTo);
        if (rule !== undefined) {
          rule.answered += 1;
          rule.onAnswer?.();
        }
        const lose = rule?.fate.lose === true;
        const hold = rule?.fate.wait;
        if (lose && hold === undefined) {
          // The server has done the work; the client never learns how it went.
          client.destroy();
          return;
        }
        if (hold === undefined && intercepted.size === 0 && outgoing === settled) {
          client.write(message);
          return;
        }
        const sent = outgoing
          .then(() => hold?.().catch(() => undefined))
          .then(() => {
            if (lose) client.destroy();
            else if (!client.destroyed) client.write(message);
          });
        outgoing = sent;
        void sent.then(() => {
          if (outgoing === sent) outgoing = settled;
        });
      }),
    );
  }

  /** The reply rule that picks a command (and counts it), or undefined. */
  private replyRuleFor(message: Buffer): ReplyRuleState | undefined {
    if (message.readInt32LE(12) !== OP_MSG || this.replyRules.every((state) => state.left === 0)) return undefined;
    if ((parseOpMsg(message).flags & MORE_TO_COME) !== 0) return undefined;
    const command = commandOf(message);
    const state = this.replyRules.find(({ match, left }) => left > 0 && match(command));
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

const settled = Promise.resolve();

/** An unref'd wait: a reply still held when the test ends keeps nothing alive (its socket is gone by then). */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** An `update` command of `collection` whose (first) update sets `status` to `status`: a job's finishing write. */
export function isStatusUpdate(command: Document, collection: string, status: string): boolean {
  const updates = command.updates as { u?: { $set?: { status?: unknown } } }[] | undefined;
  return command.update === collection && updates?.[0]?.u?.$set?.status === status;
}

/** A claim of a pending job (`take`/`takeById`): one `findAndModify` on `jobs` that sets `status: 'running'`. */
export function isClaim(command: Document): boolean {
  return command.findAndModify === 'jobs' && (command.update as Document | undefined)?.$set?.status === 'running';
}
