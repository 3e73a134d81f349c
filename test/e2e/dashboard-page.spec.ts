import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type CanActivate, type ExecutionContext, type INestApplication, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MongooseModule } from '@nestjs/mongoose';
import { JobsModule } from '../../lib';
import { JobsDashboardModule, type JobsDashboardOptions } from '../../lib/dashboard';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** Lets a request in only with the app's token. */
@Injectable()
class TokenGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    return (
      context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers.authorization === 'Bearer good'
    );
  }
}

async function startApp(
  label: string,
  dashboard: JobsDashboardOptions,
): Promise<{ app: INestApplication; base: string }> {
  @Module({
    imports: [
      MongooseModule.forRoot(testMongoUri(), { dbName: uniqueDatabaseName(label) }),
      JobsModule.forRoot({ worker: false }),
      JobsDashboardModule.forRoot(dashboard),
    ],
  })
  class AppModule {}
  const app = await NestFactory.create(AppModule, { logger: false });
  app.setGlobalPrefix('internal');
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  return { app, base: `http://127.0.0.1:${port}/internal/ops/jobs` };
}

const AUTH = { authorization: 'Bearer good' };
const ASSETS = ['assets/dashboard.js', 'assets/dashboard.css'];

describe('dashboard page over HTTP', () => {
  let guarded: { app: INestApplication; base: string };
  let readOnly: { app: INestApplication; base: string };

  beforeAll(async () => {
    guarded = await startApp('dashboard-page', { path: 'ops/jobs', guard: TokenGuard });
    readOnly = await startApp('dashboard-page-ro', { path: 'ops/jobs', allowAnonymous: true, readOnly: true });
  });

  afterAll(async () => {
    await guarded?.app.close();
    await readOnly?.app.close();
  });

  it('serves the page and its assets behind the guard, with relative URLs based where it was reached', async () => {
    for (const path of ['', ...ASSETS]) {
      expect((await fetch(`${guarded.base}/${path}`)).status).toBe(403);
    }
    const page = await fetch(guarded.base, { headers: AUTH });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await page.text();
    // The global prefix is part of the base: assets and `api/` resolve under the page whatever the app's prefix.
    expect(html).toContain('<base href="/internal/ops/jobs/">');
    expect(html).toContain('data-read-only="false"');
    expect(html).not.toMatch(/https?:\/\//);
    const types = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' };
    for (const path of ASSETS) {
      const asset = await fetch(`${guarded.base}/${path}`, { headers: AUTH });
      expect(asset.status).toBe(200);
      expect(asset.headers.get('content-type')).toBe(types[path.endsWith('.js') ? 'js' : 'css']);
    }
  });

  it('answers 404 for any other asset name (no path is read from the request)', async () => {
    for (const name of ['index.html', 'missing.js', '..%2Fdashboard-page.ts', '%2E%2E%2F%2E%2E%2Fpackage.json']) {
      expect((await fetch(`${guarded.base}/assets/${name}`, { headers: AUTH })).status).toBe(404);
    }
  });

  it('ships every asset inside the package, well under 250 KB gzipped, and tells the page when it is read-only', async () => {
    let gzipped = 0;
    for (const path of ['', ...ASSETS]) {
      const response = await fetch(`${readOnly.base}/${path}`);
      expect(response.status).toBe(200);
      gzipped += gzipSync(Buffer.from(await response.arrayBuffer())).length;
    }
    expect(gzipped).toBeLessThan(250 * 1024);
    expect(await (await fetch(readOnly.base)).text()).toContain('data-read-only="true"');
  });
});
