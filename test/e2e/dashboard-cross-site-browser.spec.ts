import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type CanActivate, type ExecutionContext, type INestApplication, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { getConnectionToken, MongooseModule } from '@nestjs/mongoose';
import { type Connection, Types } from 'mongoose';
import { type BrowserContext, chromium } from 'playwright-core';
import { JobsModule, JobsService } from '../../lib';
import { JobsDashboardModule } from '../../lib/dashboard';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** Debian's `chromium` package (`.ci/run` installs it); a missing browser fails this file, it never skips it. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const EXPECT_TIMEOUT = 10_000;
const SESSION = { name: 'session', value: 'admin-secret' };

/** The app's auth: the admin's session cookie, which the browser sends with any request to the app's origin. */
@Injectable()
class SessionGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const cookie = context.switchToHttp().getRequest<{ headers: { cookie?: string } }>().headers.cookie ?? '';
    return cookie.split(/;\s*/).includes(`${SESSION.name}=${SESSION.value}`);
  }
}

/** A page on another origin whose script tries, with the visitor's cookies, to cancel `id` and purge dead jobs. */
function attackerPage(api: string, id: string): string {
  const script = `
    const post = async (path, body) => {
      try {
        const response = await fetch(${JSON.stringify(api)} + path, {
          method: 'POST',
          credentials: 'include',
          headers: { 'content-type': 'application/json', 'x-jobs-dashboard': '1' },
          body: JSON.stringify(body),
        });
        return { status: response.status, message: (await response.json()).message ?? null };
      } catch (error) {
        return { status: 0, message: String(error) };
      }
    };
    (async () => {
      const cancel = await post('/jobs/${id}/cancel', {});
      const purge = await post('/purge', { status: 'dead', name: 'victim' });
      window.attack = { cancel, purge };
    })();`;
  return `<!doctype html><title>cute cats</title><script>${script}</script>`;
}

/**
 * A throwaway self-signed certificate for 127.0.0.1 and localhost. Both servers speak HTTPS: a cookie other sites'
 * requests carry must be `SameSite=None; Secure`, and sites compare schemes too.
 */
function selfSignedCertificate(dir: string): { key: Buffer; cert: Buffer } {
  const [key, cert] = [join(dir, 'key.pem'), join(dir, 'cert.pem')];
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1'].concat([
      '-keyout',
      key,
      '-out',
      cert,
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
    ]),
    { stdio: 'ignore' },
  );
  return { key: readFileSync(key), cert: readFileSync(cert) };
}

/**
 * A browser profile as a desktop Chrome user has one: third-party cookies allowed (`cookie_controls_mode: 0`).
 * Playwright's default contexts are incognito-like and block them, which would hide the attack rather than refuse it.
 */
function browserProfile(dir: string): string {
  const profile = join(dir, 'profile');
  mkdirSync(join(profile, 'Default'), { recursive: true });
  writeFileSync(join(profile, 'Default', 'Preferences'), JSON.stringify({ profile: { cookie_controls_mode: 0 } }));
  return profile;
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

describe('a page on another origin, in Chromium, against an app with enableCors({ origin: true, credentials: true })', () => {
  const dir = mkdtempSync(join(tmpdir(), 'jobs-cross-site-'));
  let app: INestApplication;
  let dashboard: string;
  let attacker: Server;
  let attackerPort: number;
  let admin: BrowserContext;
  let victimId = '';

  beforeAll(async () => {
    @Module({
      imports: [
        MongooseModule.forRoot(testMongoUri(), { dbName: uniqueDatabaseName('cross-site-browser') }),
        JobsModule.forRoot({ worker: false }),
        JobsDashboardModule.forRoot({ path: 'admin/jobs', guard: SessionGuard }),
      ],
    })
    class AppModule {}
    const tls = selfSignedCertificate(dir);
    app = await NestFactory.create(AppModule, { logger: false, httpsOptions: tls });
    app.enableCors({ origin: true, credentials: true });
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as { port: number };
    dashboard = `https://127.0.0.1:${port}/admin/jobs`;

    attacker = createServer(tls, (_, response) => {
      response.setHeader('content-type', 'text/html; charset=utf-8');
      response.end(attackerPage(`${dashboard}/api`, victimId));
    });
    attackerPort = await listen(attacker);

    admin = await chromium.launchPersistentContext(browserProfile(dir), {
      executablePath: CHROMIUM,
      args: ['--no-sandbox'],
      ignoreHTTPSErrors: true,
    });
    // The admin is logged in: a cookie every request to the app carries, cross-site ones included (SameSite=None).
    await admin.addCookies([{ ...SESSION, url: `https://127.0.0.1:${port}`, sameSite: 'None', secure: true }]);
  });

  afterAll(async () => {
    await admin?.close();
    await new Promise((resolve) => attacker?.close(resolve));
    await app?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const rows = () => app.get<Connection>(getConnectionToken()).collection('jobs');

  it.each([
    ['cross-site (localhost, another port)', () => `https://localhost:${attackerPort}/`],
    ['same-site (127.0.0.1, another port)', () => `https://127.0.0.1:${attackerPort}/`],
  ])('from a %s page: neither cancels nor purges, and the rows are unchanged', async (_, attackerUrl) => {
    const jobs = app.get(JobsService);
    victimId = (await jobs.enqueue('victim', { invoice: 1 }, { strict: false })).id;
    const { id: deadId } = await jobs.enqueue('victim', { invoice: 2 }, { strict: false });
    await rows().updateOne({ _id: new Types.ObjectId(deadId) }, { $set: { status: 'dead', finishedAt: new Date() } });
    const before = await rows().find({ name: 'victim' }).sort({ _id: 1 }).toArray();

    const page = await admin.newPage();
    let attack: unknown;
    try {
      await page.goto(attackerUrl());
      await page.waitForFunction(() => 'attack' in globalThis, undefined, { timeout: EXPECT_TIMEOUT });
      attack = await page.evaluate(() => (globalThis as { attack?: unknown }).attack);
    } finally {
      await page.close();
    }
    // 403 from the cross-site check, not from the app's guard: the admin's cookie did reach the app.
    const refused = { status: 403, message: expect.stringMatching(/^Cross-site state-changing dashboard call/) };
    expect({
      attack,
      statuses: [(await jobs.findById(victimId))?.status, (await jobs.findById(deadId))?.status ?? 'purged'],
    }).toEqual({ attack: { cancel: refused, purge: refused }, statuses: ['pending', 'dead'] });
    expect(await rows().find({ name: 'victim' }).sort({ _id: 1 }).toArray()).toEqual(before);
    await rows().deleteMany({ name: 'victim' });
  });

  it("lets the dashboard's own page cancel a job from its panel, and purge through its API", async () => {
    const jobs = app.get(JobsService);
    const { id } = await jobs.enqueue('own', {}, { strict: false });
    const { id: deadId } = await jobs.enqueue('own-dead', {}, { strict: false });
    await rows().updateOne({ _id: new Types.ObjectId(deadId) }, { $set: { status: 'dead', finishedAt: new Date() } });

    const page = await admin.newPage();
    try {
      await page.goto(`${dashboard}?job=${id}`);
      const panel = page.locator('#panel');
      await panel.getByRole('button', { name: 'Cancel' }).click({ timeout: EXPECT_TIMEOUT });
      await panel.locator('.status-cancelled').first().waitFor({ timeout: EXPECT_TIMEOUT });
      expect((await jobs.findById(id))?.status).toBe('cancelled');

      // The page has no purge button: the same call its script would make, from its own origin.
      const purge = await page.evaluate(async () => {
        const response = await fetch('api/purge', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-jobs-dashboard': '1' },
          body: JSON.stringify({ status: 'dead', name: 'own-dead' }),
        });
        return { status: response.status, body: await response.json() };
      });
      expect(purge).toMatchObject({ status: 200, body: { deleted: 1 } });
      expect(await jobs.findById(deadId)).toBeNull();
    } finally {
      await page.close();
    }
  });
});
