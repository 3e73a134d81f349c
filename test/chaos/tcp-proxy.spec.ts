import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { sleep } from '../support/sleep';
import { randomDelay, TcpProxy } from '../support/tcp-proxy';

/** The chaos tests trust this proxy to delay without reordering and to drop for real: check both here. */
describe('TcpProxy (chaos test tooling)', () => {
  let echo: Server;
  let echoPort: number;
  let proxy: TcpProxy;
  const clients: Socket[] = [];

  beforeAll(async () => {
    echo = createServer((socket) => {
      socket.on('error', () => undefined);
      socket.pipe(socket);
    });
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', () => resolve()));
    echoPort = (echo.address() as { port: number }).port;
  });

  afterEach(async () => {
    for (const client of clients.splice(0)) client.destroy();
    await proxy?.close();
  });

  afterAll(() => new Promise<void>((resolve) => echo.close(() => resolve())));

  const connect = (port: number) =>
    new Promise<Socket>((resolve, reject) => {
      const socket = tcpConnect(port, '127.0.0.1', () => resolve(socket));
      socket.once('error', reject);
      clients.push(socket);
    });

  /** Collects what comes back until `bytes` bytes arrived. */
  const receive = (socket: Socket, bytes: number) =>
    new Promise<string>((resolve) => {
      let data = '';
      socket.on('data', (chunk) => {
        data += String(chunk);
        if (data.length >= bytes) resolve(data);
      });
    });

  it('delays every chunk by up to the configured latency, never reordering them', async () => {
    proxy = await TcpProxy.start(`mongodb://127.0.0.1:${echoPort}`);
    proxy.setDelay(randomDelay(0, 200));
    const socket = await connect(proxy.port);
    const messages = Array.from({ length: 50 }, (_, i) => `<${String(i).padStart(3, '0')}>`);
    const expected = messages.join('');
    const received = receive(socket, expected.length);
    const started = Date.now();
    // Separate writes a few ms apart, so they travel as separate chunks with separate delays.
    for (const message of messages) {
      socket.write(message);
      await sleep(2);
    }
    expect(await received).toBe(expected);
    // Two delayed hops (there and back); the last chunk alone waits at least its own two delays.
    expect(Date.now() - started).toBeGreaterThan(150);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('drops every open connection and refuses new ones until the outage ends', async () => {
    proxy = await TcpProxy.start(`mongodb://127.0.0.1:${echoPort}`);
    const socket = await connect(proxy.port);
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => undefined);
    expect(proxy.openConnections).toBe(1);

    const outage = proxy.drop(500);
    await closed;
    expect(proxy.openConnections).toBe(0);
    // A connection attempt during the outage is reset at once.
    const refused = await connect(proxy.port).then(
      (s) => new Promise<boolean>((resolve) => s.once('close', () => resolve(true))),
      () => true,
    );
    expect(refused).toBe(true);
    expect(proxy.refused).toBeGreaterThanOrEqual(1);

    await outage;
    const after = await connect(proxy.port);
    const echoed = receive(after, 5);
    after.write('hello');
    expect(await echoed).toBe('hello');
  });
});
