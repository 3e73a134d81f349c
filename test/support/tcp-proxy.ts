import type { Server, Socket } from 'node:net';
import { connectUpstream, listenOnLoopback, type ProxyTarget, proxyTarget, uriThroughProxy } from './proxy-target';
import { sleep } from './sleep';

/** Extra latency per forwarded chunk, in ms: a fixed number, or a function called once per chunk. */
export type ChunkDelay = number | (() => number);

/** Random latency in [minMs, maxMs) per chunk. */
export const randomDelay =
  (minMs: number, maxMs: number): (() => number) =>
  () =>
    minMs + Math.random() * (maxMs - minMs);

/**
 * One direction of one connection: chunks leave in arrival order, each no earlier than its own
 * arrival + delay (a chunk never overtakes the one before it, as on a real slow link).
 */
class DelayedPipe {
  private readonly queue: { chunk: Buffer; at: number }[] = [];
  private lastAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private ended = false;

  constructor(
    private readonly to: Socket,
    private readonly delay: () => number,
  ) {}

  push(chunk: Buffer): void {
    const ms = this.delay();
    if (ms <= 0 && this.queue.length === 0) {
      this.to.write(chunk);
      return;
    }
    this.lastAt = Math.max(this.lastAt, Date.now() + ms);
    this.queue.push({ chunk, at: this.lastAt });
    this.pump();
  }

  /** Ends the destination after every queued chunk has gone out. */
  end(): void {
    this.ended = true;
    this.pump();
  }

  clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
  }

  private pump(): void {
    if (this.timer) return;
    const now = Date.now();
    while (this.queue.length > 0 && this.queue[0].at <= now) this.to.write(this.queue.shift()?.chunk as Buffer);
    if (this.queue.length > 0) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.pump();
      }, this.queue[0].at - now);
    } else if (this.ended) {
      this.to.end();
    }
  }
}

interface Link {
  client: Socket;
  upstream: Socket;
  pipes: DelayedPipe[];
}

/**
 * A TCP proxy for chaos tests, between the code under test and the MongoDB server: it can drop
 * every connection (and refuse new ones for a while), and add latency per chunk in each direction.
 */
export class TcpProxy {
  private readonly links = new Set<Link>();
  private refuseUntil = 0;
  private blackholed = false;
  private delay: () => number = () => 0;
  /** Connections accepted (and forwarded) since start. */
  accepted = 0;
  /** Connections refused during a drop. */
  refused = 0;

  private constructor(
    private readonly server: Server,
    private readonly target: ProxyTarget,
    readonly port: number,
    private readonly targetUri: string,
  ) {}

  /** Listens on 127.0.0.1 on a free port and forwards to `targetUri`'s first host (`mongodb://host:port`). */
  static async start(targetUri: string): Promise<TcpProxy> {
    const target = proxyTarget(targetUri, 'TcpProxy');
    let proxy: TcpProxy | undefined;
    const { server, port } = await listenOnLoopback('TcpProxy', (socket) => proxy?.accept(socket));
    proxy = new TcpProxy(server, target, port, targetUri);
    return proxy;
  }

  /**
   * Connection string through this proxy (`directConnection`, so the driver never bypasses it), with the target URI's
   * credentials and options (see `uriThroughProxy`).
   */
  get uri(): string {
    return uriThroughProxy(this.targetUri, this.port);
  }

  get openConnections(): number {
    return this.links.size;
  }

  /** Latency added to every chunk from now on, in both directions (existing connections included). */
  setDelay(delay: ChunkDelay): void {
    this.delay = typeof delay === 'number' ? () => delay : delay;
  }

  /**
   * Destroys every connection at once and refuses (resets) new ones for `ms`. Resolves when the
   * outage is over and the proxy forwards again.
   */
  async drop(ms: number): Promise<void> {
    this.refuseUntil = Date.now() + ms;
    for (const link of [...this.links]) this.destroy(link);
    // A timer can fire before Date.now() reaches its end: it counts from the event loop's cached time, which lags
    // behind on a busy machine (a CI run saw the first connection after the outage reset).
    while (Date.now() < this.refuseUntil) await sleep(this.refuseUntil - Date.now());
  }

  /**
   * From now on, swallows every chunk in both directions, on open and new connections: the database
   * looks alive (sockets stay open) but never answers, like a host behind a dropping firewall. Until close().
   */
  blackhole(): void {
    this.blackholed = true;
  }

  async close(): Promise<void> {
    for (const link of [...this.links]) this.destroy(link);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    if (Date.now() < this.refuseUntil) {
      this.refused += 1;
      client.on('error', () => undefined);
      client.resetAndDestroy();
      return;
    }
    this.accepted += 1;
    client.setNoDelay(true);
    const upstream = connectUpstream(this.target);
    upstream.setNoDelay(true);
    // Looked up per chunk, so setDelay() also applies to connections that are already open.
    const delay = () => this.delay();
    const toServer = new DelayedPipe(upstream, delay);
    const toClient = new DelayedPipe(client, delay);
    const link: Link = { client, upstream, pipes: [toServer, toClient] };
    this.links.add(link);
    client.on('data', (chunk) => this.blackholed || toServer.push(chunk));
    upstream.on('data', (chunk) => this.blackholed || toClient.push(chunk));
    client.on('end', () => toServer.end());
    upstream.on('end', () => toClient.end());
    // Either side failing or closing takes the whole link down, as a broken network path would.
    for (const socket of [client, upstream]) {
      socket.on('error', () => this.destroy(link));
      socket.on('close', () => this.destroy(link));
    }
  }

  private destroy(link: Link): void {
    if (!this.links.delete(link)) return;
    for (const pipe of link.pipes) pipe.clear();
    link.client.destroy();
    link.upstream.destroy();
  }
}
