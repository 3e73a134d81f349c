import { readFileSync } from 'node:fs';
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { type ConnectionOptions, connect as tlsConnect } from 'node:tls';

/**
 * Where a test proxy forwards to, and how: the first host of a `mongodb://` URI, over TLS when the URI asks for it.
 * The proxy speaks TLS to the server itself and plain TCP to the driver on 127.0.0.1, so the wire proxies can read
 * the commands, and the URI the driver gets through the proxy keeps everything else of the original.
 */
export interface ProxyTarget {
  host: string;
  port: number;
  /** Set when the URI asks for TLS (`tls=true` or `ssl=true`). */
  tls?: ConnectionOptions;
}

/** URI options about TLS: the proxy applies them upstream; the driver talks to the proxy without TLS. */
const TLS_OPTIONS = new Set(
  [
    'tls',
    'ssl',
    'tlsCAFile',
    'tlsCertificateKeyFile',
    'tlsCertificateKeyFilePassword',
    'tlsAllowInvalidCertificates',
    'tlsAllowInvalidHostnames',
    'tlsInsecure',
    'tlsDisableOCSPEndpointCheck',
    'tlsDisableCertificateRevocationCheck',
  ].map((name) => name.toLowerCase()),
);
/** URI options about which hosts to reach: through a proxy there is exactly one, reached directly. */
const TOPOLOGY_OPTIONS = new Set(['replicaset', 'directconnection', 'loadbalanced', 'srvmaxhosts', 'srvservicename']);

interface ParsedUri {
  userInfo: string;
  hosts: string[];
  path: string;
  options: [string, string][];
}

function parse(uri: string, who: string): ParsedUri {
  if (uri.startsWith('mongodb+srv://')) {
    throw new Error(`${who} needs a mongodb:// URI with its hosts (resolve the SRV record first), got mongodb+srv://`);
  }
  const match = /^mongodb:\/\/(?:([^@/]*)@)?([^/?]+)(\/[^?]*)?(?:\?(.*))?$/.exec(uri);
  if (!match) throw new Error(`${who} needs a mongodb://host:port URI, got ${uri.replace(/\/\/[^@/]*@/, '//***@')}`);
  const options = (match[4] ?? '')
    .split('&')
    .filter((pair) => pair !== '')
    .map((pair): [string, string] => {
      const at = pair.indexOf('=');
      return at < 0 ? [pair, ''] : [pair.slice(0, at), pair.slice(at + 1)];
    });
  return { userInfo: match[1] ?? '', hosts: match[2].split(','), path: match[3] ?? '/', options };
}

function option(parsed: ParsedUri, name: string): string | undefined {
  const found = parsed.options.find(([key]) => key.toLowerCase() === name.toLowerCase());
  return found === undefined ? undefined : decodeURIComponent(found[1]);
}

/** The first host of `uri` and its TLS settings, for a proxy named `who` (in error messages). */
export function proxyTarget(uri: string, who: string): ProxyTarget {
  const parsed = parse(uri, who);
  const hostMatch = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(parsed.hosts[0]);
  if (!hostMatch) throw new Error(`${who}: cannot read the host of ${parsed.hosts[0]}`);
  const host = hostMatch[1].replace(/^\[|\]$/g, '');
  const target: ProxyTarget = { host, port: Number(hostMatch[2] ?? 27017) };
  const enabled = (name: string) => option(parsed, name) === 'true';
  if (!enabled('tls') && !enabled('ssl')) return target;
  const insecure = enabled('tlsInsecure');
  const caFile = option(parsed, 'tlsCAFile');
  const keyFile = option(parsed, 'tlsCertificateKeyFile');
  const passphrase = option(parsed, 'tlsCertificateKeyFilePassword');
  target.tls = {
    host,
    servername: /^[\d.:]+$/.test(host) ? undefined : host,
    rejectUnauthorized: !(insecure || enabled('tlsAllowInvalidCertificates')),
    ...(insecure || enabled('tlsAllowInvalidHostnames') ? { checkServerIdentity: () => undefined } : {}),
    ...(caFile === undefined ? {} : { ca: readFileSync(caFile) }),
    ...(keyFile === undefined ? {} : { cert: readFileSync(keyFile), key: readFileSync(keyFile), passphrase }),
  };
  return target;
}

/** A connection to the target, over TLS when it asks for it. */
export function connectUpstream(target: ProxyTarget): Socket {
  return target.tls ? tlsConnect({ ...target.tls, port: target.port }) : tcpConnect(target.port, target.host);
}

/**
 * `uri` pointed at a proxy on 127.0.0.1:`port`: the credentials, database and every other option (authSource,
 * authMechanism, appName, write concern…) kept as they were; `directConnection=true` instead of `replicaSet` (the
 * driver must talk to the proxy, never to the members a replica-set hello lists); TLS left to the proxy.
 */
export function uriThroughProxy(uri: string, port: number): string {
  const parsed = parse(uri, 'uriThroughProxy');
  const kept = parsed.options.filter(([key]) => {
    const name = key.toLowerCase();
    return !TLS_OPTIONS.has(name) && !TOPOLOGY_OPTIONS.has(name);
  });
  const query = [...kept, ['directConnection', 'true']].map(([key, value]) => `${key}=${value}`).join('&');
  const userInfo = parsed.userInfo === '' ? '' : `${parsed.userInfo}@`;
  return `mongodb://${userInfo}127.0.0.1:${port}${parsed.path}?${query}`;
}

/**
 * A TCP server on 127.0.0.1 at a free port (what every test proxy listens on), passing each connection to `onClient`.
 * `onClient` may be bound after this resolves: a proxy is built from the server's port, then takes its connections.
 */
export async function listenOnLoopback(
  who: string,
  onClient: (client: Socket) => void,
): Promise<{ server: Server; port: number }> {
  const server = createServer(onClient);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error(`${who}: no TCP address`);
  return { server, port: address.port };
}

/**
 * Ties a client connection to its upstream one, as the wire proxies do: no Nagle delay, errors swallowed (a test cuts
 * connections on purpose), both tracked in `sockets` while open, and either one closing closes the other.
 */
export function pairSockets(client: Socket, upstream: Socket, sockets: Set<Socket>): void {
  for (const socket of [client, upstream]) {
    socket.setNoDelay(true);
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => {
      sockets.delete(socket);
      client.destroy();
      upstream.destroy();
    });
  }
}
