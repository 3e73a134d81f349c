import { describe, expect, it } from '@jest/globals';
import { mongo } from 'mongoose';
import { ErrorReplyProxy } from '../../support/error-reply-proxy';
import { proxyTarget, uriThroughProxy } from '../../support/proxy-target';
import { SessionWireProxy } from '../../support/session-wire-proxy';
import { TcpProxy } from '../../support/tcp-proxy';

/**
 * The test proxies must pass on what MONGODB_URI says. The Java test server has no authentication, so this checks
 * the rebuilt URI as the driver reads it (its own parser): the credentials go into the handshake's saslStart, which
 * the proxies forward byte for byte (SCRAM binds no channel), so a URI that keeps them authenticates through a proxy.
 */
const parsed = (uri: string) => new mongo.MongoClient(uri).options;

describe('test proxies keep MONGODB_URI whole', () => {
  const original =
    'mongodb://app%40user:p%3Ass@db1.example.net:27018,db2.example.net:27019/appdb' +
    '?replicaSet=rs0&authSource=admin&authMechanism=SCRAM-SHA-256&tls=true&tlsAllowInvalidHostnames=true' +
    '&appName=jobs-tests&w=majority';

  it('keeps user, password, auth source and mechanism, database and other options; one host, directly', () => {
    const through = uriThroughProxy(original, 4242);
    const options = parsed(through);
    expect(options.credentials).toMatchObject({
      username: 'app@user',
      password: 'p:ss',
      source: 'admin',
      mechanism: 'SCRAM-SHA-256',
    });
    expect(options.dbName).toBe('appdb');
    expect(options.appName).toBe('jobs-tests');
    expect(options.writeConcern?.w).toBe('majority');
    expect(options.hosts.map(String)).toEqual(['127.0.0.1:4242']);
    expect(options.directConnection).toBe(true);
    expect(options.replicaSet).toBeUndefined();
    // The proxy speaks TLS to the server; the driver speaks plain TCP to the proxy on 127.0.0.1.
    expect(options.tls).toBeFalsy();
  });

  it('the proxy connects to the first host with the TLS the URI asked for', () => {
    expect(proxyTarget(original, 'test')).toMatchObject({
      host: 'db1.example.net',
      port: 27018,
      tls: { servername: 'db1.example.net', rejectUnauthorized: true },
    });
    expect(proxyTarget('mongodb://127.0.0.1:27017', 'test')).toEqual({ host: '127.0.0.1', port: 27017 });
    expect(proxyTarget('mongodb://u:p@h?ssl=true&tlsInsecure=true', 'test').tls).toMatchObject({
      rejectUnauthorized: false,
    });
  });

  it('a URI without credentials or options comes out as the proxies always built it', () => {
    expect(uriThroughProxy('mongodb://127.0.0.1:27017', 5000)).toBe('mongodb://127.0.0.1:5000/?directConnection=true');
  });

  it('an SRV URI is refused with the reason (a proxy needs a host to forward to)', () => {
    expect(() => proxyTarget('mongodb+srv://u:p@cluster.example.net/db', 'TcpProxy')).toThrow(/resolve the SRV/);
  });

  it.each([
    ['TcpProxy', (uri: string) => TcpProxy.start(uri)],
    ['ErrorReplyProxy', (uri: string) => ErrorReplyProxy.start(uri)],
    ['SessionWireProxy', (uri: string) => SessionWireProxy.start(uri)],
  ])('%s hands the driver a URI with the credentials and options of the one it forwards to', async (_name, start) => {
    const proxy = await start('mongodb://tester:secret@127.0.0.1:27017/?authSource=admin&replicaSet=rs0&tls=true');
    try {
      const options = parsed(proxy.uri);
      expect(options.credentials).toMatchObject({ username: 'tester', password: 'secret', source: 'admin' });
      expect(options.hosts.map(String)).toEqual([`127.0.0.1:${proxy.port}`]);
      expect(options.directConnection).toBe(true);
    } finally {
      await proxy.close();
    }
  });
});
