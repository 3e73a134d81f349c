import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type CanActivate, type ExecutionContext, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { getConnectionToken, MongooseModule } from '@nestjs/mongoose';
import type { NestExpressApplication } from '@nestjs/platform-express';
import type { Connection } from 'mongoose';
import { InvalidOptionError, JobsModule, JobsService } from '../../lib';
import { JobsDashboardModule } from '../../lib/dashboard';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** The admin's session cookie, as a browser would send it along with any request to the app's origin. */
const SESSION = 'session=admin-secret';
const ALLOWED = 'https://admin.example.com';

@Injectable()
class SessionGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    return context.switchToHttp().getRequest<{ headers: { cookie?: string } }>().headers.cookie === SESSION;
  }
}

interface Started {
  app: NestExpressApplication;
  base: string;
  origin: string;
}

/** An app whose CORS lets any origin send credentialed requests with any header: the setting that opened the hole. */
async function startApp(label: string, trustProxy: boolean): Promise<Started> {
  @Module({
    imports: [
      MongooseModule.forRoot(testMongoUri(), { dbName: uniqueDatabaseName(label) }),
      JobsModule.forRoot({ worker: false }),
      JobsDashboardModule.forRoot({ path: 'admin/jobs', guard: SessionGuard, allowedOrigins: [ALLOWED] }),
    ],
  })
  class AppModule {}
  const app = await NestFactory.create<NestExpressApplication>(AppModule, { logger: false });
  app.enableCors({ origin: true, credentials: true });
  if (trustProxy) app.set('trust proxy', true);
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  const origin = `http://127.0.0.1:${port}`;
  return { app, base: `${origin}/admin/jobs/api`, origin };
}

/** The headers the dashboard's own page sends on a mutation, plus the ones a case adds. */
const mutation = (headers: Record<string, string>) => ({
  cookie: SESSION,
  'content-type': 'application/json',
  'x-jobs-dashboard': '1',
  ...headers,
});

async function cancelStatus(started: Started, headers: Record<string, string>): Promise<[number, string | undefined]> {
  const jobs = started.app.get(JobsService);
  const { id } = await jobs.enqueue('target', {}, { strict: false });
  const response = await fetch(`${started.base}/jobs/${id}/cancel`, {
    method: 'POST',
    headers: mutation(headers),
    body: '{}',
  });
  return [response.status, (await jobs.findById(id))?.status];
}

describe('state-changing dashboard calls from another site, with enableCors({ origin: true, credentials: true })', () => {
  let direct: Started;
  let proxied: Started;

  beforeAll(async () => {
    direct = await startApp('cross-site', false);
    proxied = await startApp('cross-site-proxied', true);
  });
  afterAll(async () => {
    await direct?.app.close();
    await proxied?.app.close();
  });

  it('follows Sec-Fetch-Site when the browser sends it: same-origin only, or an Origin in allowedOrigins', async () => {
    const cases: [string, Record<string, string>, number][] = [
      ['same-origin', { 'sec-fetch-site': 'same-origin', origin: direct.origin }, 200],
      ['same-origin, no Origin', { 'sec-fetch-site': 'same-origin' }, 200],
      ['cross-site', { 'sec-fetch-site': 'cross-site', origin: 'http://evil.example' }, 403],
      ['same-site (another port)', { 'sec-fetch-site': 'same-site', origin: 'http://127.0.0.1:1' }, 403],
      ['none (typed in the address bar)', { 'sec-fetch-site': 'none' }, 403],
      ['cross-site claiming our Origin', { 'sec-fetch-site': 'cross-site', origin: direct.origin }, 403],
      ['cross-site from an allowed origin', { 'sec-fetch-site': 'cross-site', origin: ALLOWED }, 200],
      ['same-site from an allowed origin', { 'sec-fetch-site': 'same-site', origin: ALLOWED }, 200],
    ];
    const results = [];
    for (const [label, headers] of cases) results.push([label, ...(await cancelStatus(direct, headers))]);
    expect(results).toEqual(
      cases.map(([label, , status]) => [label, status, status === 200 ? 'cancelled' : 'pending']),
    );
  });

  it("compares Origin with the request's own origin (or allowedOrigins) when Sec-Fetch-Site is absent", async () => {
    const port = new URL(direct.origin).port;
    const cases: [string, Record<string, string>, number][] = [
      ['neither header (curl, server-to-server)', {}, 200],
      ['own origin', { origin: direct.origin }, 200],
      ['allowed origin', { origin: ALLOWED }, 200],
      ['another origin', { origin: 'http://evil.example' }, 403],
      ['same host, another port', { origin: 'http://127.0.0.1:1' }, 403],
      ['another host, same port', { origin: `http://localhost:${port}` }, 403],
      ['same host and port over https', { origin: `https://127.0.0.1:${port}` }, 403],
      ['Origin: null (sandboxed frame, file: page)', { origin: 'null' }, 403],
      ['the allowed origin with a trailing slash', { origin: `${ALLOWED}/` }, 403],
    ];
    const results = [];
    for (const [label, headers] of cases) results.push([label, ...(await cancelStatus(direct, headers))]);
    expect(results).toEqual(
      cases.map(([label, , status]) => [label, status, status === 200 ? 'cancelled' : 'pending']),
    );
  });

  it('honours X-Forwarded-Host and -Proto only when the app trusts its proxy', async () => {
    const forwarded = { 'x-forwarded-host': 'jobs.example.com', 'x-forwarded-proto': 'https' };
    const cases: [string, Started, Record<string, string>, number][] = [
      ['trusted proxy, Origin as forwarded', proxied, { ...forwarded, origin: 'https://jobs.example.com' }, 200],
      ['trusted proxy, scheme differs', proxied, { ...forwarded, origin: 'http://jobs.example.com' }, 403],
      ['trusted proxy, socket origin', proxied, { ...forwarded, origin: proxied.origin }, 403],
      ['untrusted, Origin as forwarded', direct, { ...forwarded, origin: 'https://jobs.example.com' }, 403],
      [
        'untrusted, forged to match the attacker',
        direct,
        { 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'http', origin: 'http://evil.example' },
        403,
      ],
      [
        'trusted proxy, but the browser says cross-site',
        proxied,
        { ...forwarded, origin: 'https://jobs.example.com', 'sec-fetch-site': 'cross-site' },
        403,
      ],
    ];
    const results = [];
    for (const [label, started, headers] of cases) results.push([label, ...(await cancelStatus(started, headers))]);
    expect(results).toEqual(
      cases.map(([label, , , status]) => [label, status, status === 200 ? 'cancelled' : 'pending']),
    );
  });

  it('refuses cross-site bulk retry and purge too, deleting and changing nothing, and says why', async () => {
    const jobs = direct.app.get(JobsService);
    const rows = direct.app.get<Connection>(getConnectionToken()).collection('jobs');
    const { id } = await jobs.enqueue('swept', {}, { strict: false });
    await rows.updateMany({ name: 'swept' }, { $set: { status: 'dead', finishedAt: new Date() } });
    const before = await rows.find({ name: 'swept' }).toArray();
    const crossSite = { 'sec-fetch-site': 'cross-site', origin: 'http://evil.example' };
    for (const [path, body] of [
      ['purge', { status: 'dead', name: 'swept' }],
      ['jobs/retry', { status: 'dead', name: 'swept' }],
    ] as const) {
      const response = await fetch(`${direct.base}/${path}`, {
        method: 'POST',
        headers: mutation(crossSite),
        body: JSON.stringify(body),
      });
      expect([path, response.status]).toEqual([path, 403]);
      expect(((await response.json()) as { message: string }).message).toMatch(/cross-site.*allowedOrigins/i);
    }
    expect(await rows.find({ name: 'swept' }).toArray()).toEqual(before);
    expect((await jobs.findById(id))?.status).toBe('dead');
  });
});

describe('allowedOrigins validation', () => {
  it('refuses anything but an array of origins spelt as browsers send them, with InvalidOptionError', () => {
    const guard = SessionGuard;
    for (const allowedOrigins of [
      'https://admin.example.com',
      [`${ALLOWED}/`],
      ['https://Admin.example.com'],
      ['https://admin.example.com:443'],
      ['https://admin.example.com/path'],
      ['*'],
      ['null'],
      ['admin.example.com'],
      ['ftp://admin.example.com'],
      [42],
    ]) {
      expect(() => JobsDashboardModule.forRoot({ guard, allowedOrigins: allowedOrigins as never })).toThrow(
        InvalidOptionError,
      );
    }
    expect(() => JobsDashboardModule.forRoot({ guard, allowedOrigins: [`${ALLOWED}/`] })).toThrow(
      `did you mean '${ALLOWED}'?`,
    );
    expect(() =>
      JobsDashboardModule.forRoot({ guard, allowedOrigins: [ALLOWED, 'http://localhost:3000', 'http://[::1]:8080'] }),
    ).not.toThrow();
  });
});
