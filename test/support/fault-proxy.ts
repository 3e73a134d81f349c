import { type Server, type Socket, connect as tcpConnect } from 'node:net';
import type { Document } from 'bson';
import { type CommandKind, classifyCommand } from './command-kind';
import { listenOnLoopback } from './proxy-target';
import {
  framer,
  MORE_TO_COME,
  OP_MSG,
  parseOpMsg,
  parseSequences,
  replyTo,
  requestId,
  responseTo,
} from './wire-messages';

/** What the proxy does to one command. */
export type CommandFault =
  /** Forward the command, hold its reply for `ms`. */
  | { type: 'delay'; ms: number }
  /** Forward the command (it executes), then drop its reply and close the connection: landed, answer lost. */
  | { type: 'lose-reply' }
  /** Answer an error reply with this server code instead of forwarding: the command never executes. */
  | { type: 'error-reply'; code: number; codeName: string };

/** One command as the fault decider sees it. */
export interface ProxiedCommand {
  /** The command's name (its first key): `findAndModify`, `update`, `insert`, `find`… */
  name: string;
  kind: CommandKind;
  /** The collection it targets, when it names one. */
  collection?: string;
  /** Connection number within this proxy (1-based, in accept order). */
  connection: number;
  /** The row the command is about, as hex, when its filter names one by `_id` (a renewal, an outcome write…). */
  job?: string;
}

/** Decides the fault for one command, or none. Called once per OP_MSG request from the client. */
export type FaultDecider = (command: ProxiedCommand) => CommandFault | undefined;

/** A fault the proxy injected, as recorded in `FaultProxy.faults` and passed to `onFault`. */
export interface InjectedFault {
  /** Epoch ms when it was injected. */
  at: number;
  proxy: string;
  connection: number;
  /** Command name and kind; absent for proxy-wide faults (`cut`, `blackhole`). */
  command?: string;
  kind?: CommandKind;
  fault: CommandFault['type'] | 'cut' | 'blackhole';
  code?: number;
  ms?: number;
}

/**
 * What became of the reply to a command whose reply was faulted (delayed or lost), with the job it was about when the
 * reply names one (`value._id` of a findAndModify: the row a claim took): what ties a fault to one job's history.
 */
export interface FaultedReply {
  /** Epoch ms when the reply was delivered, or dropped. */
  at: number;
  proxy: string;
  connection: number;
  command: string;
  kind: CommandKind;
  fault: 'delay' | 'lose-reply';
  /** The row the reply returned, as hex, when it returned one. */
  job?: string;
  /** False when the reply never reached the client (lost on purpose, or its connection was cut meanwhile). */
  delivered: boolean;
  /** How long the reply was held (delay only). */
  ms?: number;
}

export interface FaultProxyOptions {
  /** Name in the recorded faults. @default 'proxy' */
  label?: string;
  /** The jobs collection: commands on other collections are classified `other`. @default 'jobs' */
  collection?: string;
  /** Called synchronously for each injected fault (after it is added to `faults`). */
  onFault?: (fault: InjectedFault) => void;
  /** Called when the reply of a delayed or lost command is delivered or dropped. */
  onFaultedReply?: (reply: FaultedReply) => void;
}

/** A faulted command waiting for its reply. */
interface AwaitedReply {
  fault: CommandFault;
  command: ProxiedCommand;
}

interface Link {
  id: number;
  client: Socket;
  upstream: Socket;
  /** Faults waiting for the reply to a request id. */
  awaitingReply: Map<number, AwaitedReply>;
  /** Delayed replies not yet delivered, by their timer (reported as lost if the connection goes first). */
  delayed: Map<NodeJS.Timeout, Omit<FaultedReply, 'at' | 'delivered'>>;
}

/**
 * A wire-protocol proxy for fault tests, between the code under test and the MongoDB server. Per command (OP_MSG),
 * a decider set with `setDecider` may delay the reply, let the command execute and lose its reply (closing the
 * connection), or answer an error reply instead of executing; proxy-wide it can cut every connection, or swallow all
 * traffic for a while (black hole). Every injected fault is recorded in `faults`.
 */
export class FaultProxy {
  /** Every fault injected so far, in order. */
  readonly faults: InjectedFault[] = [];
  private readonly links = new Set<Link>();
  private decide: FaultDecider | undefined;
  private blackholeUntil = 0;
  private connections = 0;
  private readonly label: string;
  private readonly collection: string;

  private constructor(
    private readonly server: Server,
    private readonly target: { host: string; port: number },
    readonly port: number,
    private readonly options: FaultProxyOptions,
  ) {
    this.label = options.label ?? 'proxy';
    this.collection = options.collection ?? 'jobs';
  }

  /** Listens on 127.0.0.1 on a free port and forwards to `targetUri`'s first host (`mongodb://host:port`). */
  static async start(targetUri: string, options: FaultProxyOptions = {}): Promise<FaultProxy> {
    const match = /^mongodb:\/\/(?:[^@/]*@)?([^:/,]+):(\d+)/.exec(targetUri);
    if (!match) throw new Error(`FaultProxy needs a mongodb://host:port URI, got ${targetUri}`);
    const target = { host: match[1], port: Number(match[2]) };
    let proxy: FaultProxy | undefined;
    const { server, port } = await listenOnLoopback('FaultProxy', (socket) => proxy?.accept(socket));
    proxy = new FaultProxy(server, target, port, options);
    return proxy;
  }

  /** Connection string through this proxy (`directConnection`, so the driver never bypasses it). */
  get uri(): string {
    return `mongodb://127.0.0.1:${this.port}/?directConnection=true`;
  }

  /** The per-command fault decider from now on; `undefined` forwards everything unchanged. */
  setDecider(decide: FaultDecider | undefined): void {
    this.decide = decide;
  }

  /** Destroys every open connection at once (new ones are accepted). */
  cutAll(): void {
    this.record({ fault: 'cut' });
    for (const link of [...this.links]) this.destroy(link);
  }

  /**
   * Swallows every byte in both directions for `ms`, on open and new connections (the server looks alive but never
   * answers), then cuts the connections that were open, so the requests lost in the hole fail instead of hanging.
   */
  blackhole(ms: number): void {
    this.record({ fault: 'blackhole', ms });
    this.blackholeUntil = Date.now() + ms;
    const timer = setTimeout(() => {
      for (const link of [...this.links]) this.destroy(link);
    }, ms);
    timer.unref();
  }

  get openConnections(): number {
    return this.links.size;
  }

  async close(): Promise<void> {
    this.decide = undefined;
    for (const link of [...this.links]) this.destroy(link);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private get blackholed(): boolean {
    return Date.now() < this.blackholeUntil;
  }

  private accept(client: Socket): void {
    this.connections += 1;
    const upstream = tcpConnect(this.target.port, this.target.host);
    const link: Link = { id: this.connections, client, upstream, awaitingReply: new Map(), delayed: new Map() };
    this.links.add(link);
    for (const socket of [client, upstream]) {
      socket.setNoDelay(true);
      socket.on('error', () => this.destroy(link));
      socket.on('close', () => this.destroy(link));
    }
    client.on(
      'data',
      framer((message) => {
        if (!this.blackholed) this.fromClient(link, message);
      }),
    );
    upstream.on(
      'data',
      framer((message) => {
        if (!this.blackholed) this.fromServer(link, message);
      }),
    );
  }

  private fromClient(link: Link, message: Buffer): void {
    const command = this.decide && message.readInt32LE(12) === OP_MSG ? this.describe(link, message) : undefined;
    const fault = command && this.decide?.(command);
    if (!command || !fault) {
      link.upstream.write(message);
      return;
    }
    this.record({
      connection: link.id,
      command: command.name,
      kind: command.kind,
      fault: fault.type,
      ...(fault.type === 'error-reply' && { code: fault.code }),
      ...(fault.type === 'delay' && { ms: fault.ms }),
    });
    if (fault.type === 'error-reply') {
      link.client.write(replyTo(message, errorReply(fault.code, fault.codeName)));
      return;
    }
    link.awaitingReply.set(requestId(message), { fault, command });
    link.upstream.write(message);
  }

  private fromServer(link: Link, message: Buffer): void {
    const awaited = link.awaitingReply.get(responseTo(message));
    if (!awaited) {
      link.client.write(message);
      return;
    }
    link.awaitingReply.delete(responseTo(message));
    const { fault, command } = awaited;
    if (fault.type === 'error-reply') return;
    const reply = {
      proxy: this.label,
      connection: link.id,
      command: command.name,
      kind: command.kind,
      fault: fault.type,
      job: replyJob(message),
    };
    if (fault.type === 'lose-reply') {
      this.options.onFaultedReply?.({ ...reply, at: Date.now(), delivered: false });
      this.destroy(link);
      return;
    }
    const timer = setTimeout(() => {
      link.delayed.delete(timer);
      const delivered = this.links.has(link);
      if (delivered) link.client.write(message);
      this.options.onFaultedReply?.({ ...reply, ms: fault.ms, at: Date.now(), delivered });
    }, fault.ms);
    link.delayed.set(timer, { ...reply, ms: fault.ms });
  }

  private describe(link: Link, message: Buffer): ProxiedCommand | undefined {
    let body: Document;
    let sequences: Map<string, Document[]>;
    try {
      const parsed = parseOpMsg(message, {});
      // A fire-and-forget message gets no reply to fault; the streaming hello of the monitor is one.
      if ((parsed.flags & MORE_TO_COME) !== 0) return undefined;
      body = parsed.body;
      sequences = parseSequences(parsed.rest);
    } catch {
      return undefined;
    }
    const name = Object.keys(body)[0];
    const target = body[name];
    const collection = typeof target === 'string' ? target : undefined;
    const kind = collection === this.collection ? classifyCommand(name, body, sequences) : 'other';
    const job = kind === 'other' ? undefined : filterJob(name, body, sequences);
    return { name, kind, collection, connection: link.id, ...(job && { job }) };
  }

  private record(fault: Omit<InjectedFault, 'at' | 'proxy' | 'connection'> & { connection?: number }): void {
    const injected: InjectedFault = { at: Date.now(), proxy: this.label, connection: 0, ...fault };
    this.faults.push(injected);
    this.options.onFault?.(injected);
  }

  private destroy(link: Link): void {
    if (!this.links.delete(link)) return;
    for (const [timer, reply] of link.delayed) {
      clearTimeout(timer);
      this.options.onFaultedReply?.({ ...reply, at: Date.now(), delivered: false });
    }
    link.delayed.clear();
    link.client.destroy();
    link.upstream.destroy();
  }
}

/** The `_id` (as hex) of the row a findAndModify reply returned, if any. */
function replyJob(message: Buffer): string | undefined {
  try {
    if (message.readInt32LE(12) !== OP_MSG) return undefined;
    const value = parseOpMsg(message, {}).body.value as { _id?: { toHexString?: () => string } } | null | undefined;
    return value?._id?.toHexString?.();
  } catch {
    return undefined;
  }
}

/** The `_id` (as hex) a findAndModify's query or an update's first filter names, if it names exactly one. */
function filterJob(name: string, body: Document, sequences: Map<string, Document[]>): string | undefined {
  const filter =
    name === 'findAndModify'
      ? (body.query as Document | undefined)
      : name === 'update'
        ? (((body.updates as Document[] | undefined) ?? sequences.get('updates') ?? [])[0]?.q as Document | undefined)
        : undefined;
  const id = filter?._id as { toHexString?: () => string } | undefined;
  return typeof id?.toHexString === 'function' ? id.toHexString() : undefined;
}

function errorReply(code: number, codeName: string): Document {
  return { ok: 0, errmsg: `injected by FaultProxy (${codeName})`, code, codeName };
}
