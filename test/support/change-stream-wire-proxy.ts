import type { Server, Socket } from 'node:net';
import { type Document, deserialize, Long, serialize } from 'bson';
import {
  connectUpstream,
  listenOnLoopback,
  type ProxyTarget,
  pairSockets,
  proxyTarget,
  uriThroughProxy,
} from './proxy-target';
import { framer, OP_MSG, parseOpMsg, replyTo } from './wire-messages';

/** A change-stream `aggregate` the client sent: its `$changeStream` options and the stages after it. */
export interface RecordedStreamOpen {
  collection: string;
  /** The `$changeStream` stage's options (`resumeAfter`, `startAfter`, `startAtOperationTime`…). */
  options: Document;
  pipeline: Document[];
}

/** An error the proxy answers one getMore with. */
export interface ScriptedError {
  code: number;
  codeName?: string;
  errorLabels?: string[];
}

/** A getMore with nothing to send is held this long at most (the driver asks again at once): short, for quick tests. */
const HOLD_EMPTY_MS = 100;

interface OpenCursor {
  ns: string;
  /** The token of the last batch sent (postBatchResumeToken). */
  token: Document;
}

/**
 * A wire-protocol proxy that gives a server without change streams one, for tests of a change stream's wiring: it
 * answers `aggregate` commands whose pipeline opens with `$changeStream` itself (a cursor of its own, recorded), their
 * `getMore`s with the events a test scripts (`emit`) or an error (`failNextGetMore`), and their `killCursors`;
 * every other command goes to the server unchanged. It delivers what it is given: the pipeline's `$match` and
 * `$project` are the test's to apply (or to check against the recorded pipeline), not the proxy's.
 */
export class ChangeStreamWireProxy {
  /** Every change-stream `aggregate`, in order. */
  readonly opens: RecordedStreamOpen[] = [];
  /** getMore commands answered so far (any cursor of this proxy). */
  getMores = 0;
  /** Cursor ids killed by the client. */
  readonly killed: number[] = [];
  private readonly sockets = new Set<Socket>();
  private readonly cursors = new Map<number, OpenCursor>();
  private readonly events: Document[] = [];
  private readonly errors: ScriptedError[] = [];
  /** getMores held for lack of events: answered by the next `emit` or after `HOLD_EMPTY_MS`. */
  private readonly held = new Set<() => void>();
  private nextCursorId = 1_000;
  private nextToken = 0;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly targetUri: string,
  ) {}

  static async start(targetUri: string): Promise<ChangeStreamWireProxy> {
    const target = proxyTarget(targetUri, 'ChangeStreamWireProxy');
    let proxy: ChangeStreamWireProxy | undefined;
    const { server, port } = await listenOnLoopback('ChangeStreamWireProxy', (client) => proxy?.accept(client, target));
    proxy = new ChangeStreamWireProxy(server, port, targetUri);
    return proxy;
  }

  /** Connection string through this proxy (`directConnection`), with the target URI's credentials and options. */
  get uri(): string {
    return uriThroughProxy(this.targetUri, this.port);
  }

  /**
   * Sends `event` (its `_id`, the resume token, is added: `{ _data: 'T<n>' }`) to the open stream's next getMore, at
   * once if one is held. Resolves the token.
   */
  emit(event: Document): Document {
    this.nextToken += 1;
    const token = { _data: `T${this.nextToken}` };
    this.events.push({ _id: token, ...event });
    for (const release of this.held) release();
    return token;
  }

  /** Answers the next getMore with this error (each call: one more). */
  failNextGetMore(error: ScriptedError): void {
    this.errors.push(error);
    for (const release of this.held) release();
  }

  async close(): Promise<void> {
    for (const release of this.held) release();
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, target: ProxyTarget): void {
    const upstream = connectUpstream(target);
    pairSockets(client, upstream, this.sockets);
    client.on(
      'data',
      framer((message) => {
        if (!this.answer(message, (reply) => client.destroyed || client.write(reply))) upstream.write(message);
      }),
    );
    upstream.on(
      'data',
      framer((message) => client.write(message)),
    );
  }

  /** Answers a change-stream command here (true), or leaves it to the server (false). */
  private answer(message: Buffer, send: (reply: Buffer) => void): boolean {
    if (message.readInt32LE(12) !== OP_MSG) return false;
    const body = deserialize(serialize(parseOpMsg(message).body)) as Document;
    const name = Object.keys(body)[0];
    if (name === 'aggregate' && Array.isArray(body.pipeline) && body.pipeline[0]?.$changeStream) {
      const [stage, ...pipeline] = body.pipeline as Document[];
      this.opens.push({ collection: String(body.aggregate), options: stage.$changeStream, pipeline });
      const id = this.nextCursorId++;
      const cursor: OpenCursor = { ns: `${body.$db}.${body.aggregate}`, token: { _data: `T${this.nextToken}` } };
      this.cursors.set(id, cursor);
      send(
        replyTo(message, {
          cursor: { firstBatch: [], postBatchResumeToken: cursor.token, id: Long.fromNumber(id), ns: cursor.ns },
          ok: 1,
        }),
      );
      return true;
    }
    if (name === 'getMore' && this.cursors.has(Number(body.getMore))) {
      this.getMore(message, Number(body.getMore), send);
      return true;
    }
    if (name === 'killCursors') {
      const ids = (body.cursors as unknown[]).map(Number);
      if (!ids.some((id) => this.cursors.has(id))) return false;
      for (const id of ids) this.cursors.delete(id);
      this.killed.push(...ids);
      send(
        replyTo(message, {
          cursorsKilled: ids.map((id) => Long.fromNumber(id)),
          cursorsNotFound: [],
          cursorsAlive: [],
          cursorsUnknown: [],
          ok: 1,
        }),
      );
      return true;
    }
    return false;
  }

  /** Sends the scripted error, or the events queued (all of them), or after a short hold an empty batch. */
  private getMore(message: Buffer, id: number, send: (reply: Buffer) => void): void {
    const respond = () => {
      this.held.delete(respond);
      clearTimeout(timer);
      const cursor = this.cursors.get(id);
      const error = this.errors.shift();
      this.getMores += 1;
      if (error || !cursor) {
        this.cursors.delete(id);
        const { code, codeName = 'ScriptedError', errorLabels } = error ?? { code: 43, codeName: 'CursorNotFound' };
        send(
          replyTo(message, {
            ok: 0,
            errmsg: `${codeName} scripted by ChangeStreamWireProxy`,
            code,
            codeName,
            ...(errorLabels && { errorLabels }),
          }),
        );
        return;
      }
      const batch = this.events.splice(0);
      if (batch.length > 0) cursor.token = batch[batch.length - 1]._id as Document;
      send(
        replyTo(message, {
          cursor: { nextBatch: batch, postBatchResumeToken: cursor.token, id: Long.fromNumber(id), ns: cursor.ns },
          ok: 1,
        }),
      );
    };
    const timer = setTimeout(respond, HOLD_EMPTY_MS);
    if (this.events.length > 0 || this.errors.length > 0) respond();
    else this.held.add(respond);
  }
}
