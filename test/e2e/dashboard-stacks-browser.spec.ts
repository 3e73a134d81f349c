import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MongooseModule } from '@nestjs/mongoose';
import { type Browser, chromium, type Page } from 'playwright-core';
import { JobHandler, JobsModule, JobsService } from '../../lib';
import { JobsDashboardModule } from '../../lib/dashboard';
import { waitFor } from '../support/jobs-app';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** Debian's `chromium` package (`.ci/run` installs it); a missing browser fails this file, it never skips it. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const EXPECT_TIMEOUT = 10_000;
/** A credential, an internal host and markup, only in the cause: shown as text, and only when allowed. */
const SECRET_CAUSE = 'db password=hunter2 at 10.0.0.5 <img src=x onerror="window.pwned=1"><b>bold</b>';

@Injectable()
class BrokenHandlers {
  @JobHandler('report.sync', { maxAttempts: 1 })
  sync(): never {
    throw new Error('Sync failed', { cause: new Error(SECRET_CAUSE) });
  }
}

/** The dashboard page's job panel, in a real headless Chromium: a failed attempt's stack only with `showStacks`. */
describe('dashboard page: stacks in the job panel', () => {
  let browser: Browser;
  let app: INestApplication;
  let base: string;
  let page: Page;
  let deadId: string;

  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    @Module({
      imports: [
        MongooseModule.forRoot(testMongoUri(), { dbName: uniqueDatabaseName('dashboard-stacks-browser') }),
        JobsModule.forRoot({ pollIntervalMs: 50 }),
        JobsDashboardModule.forRoot({ path: 'admin/jobs', allowAnonymous: true }),
        JobsDashboardModule.forRoot({ path: 'debug/jobs', allowAnonymous: true, showStacks: true }),
      ],
      providers: [BrokenHandlers],
    })
    class AppModule {}
    app = await NestFactory.create(AppModule, { logger: false });
    app.enableShutdownHooks();
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as { port: number };
    base = `http://127.0.0.1:${port}`;
    const jobs = app.get(JobsService);
    deadId = (await jobs.enqueue('report.sync')).id;
    await waitFor(async () => (await jobs.findById(deadId))?.status === 'dead', 'the job to go dead');
    page = await browser.newPage();
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  /** Lists the dead jobs and opens this one's panel with its button, as an operator would. */
  async function openDeadJob(path: string): Promise<void> {
    await page.goto(`${base}/${path}?status=dead`);
    await page.getByRole('link', { name: `Open job ${deadId}` }).click();
    await page.locator('#panel-attempts .error', { hasText: 'Sync failed' }).waitFor({ timeout: EXPECT_TIMEOUT });
  }

  it('shows the attempt without its stack or cause by default', async () => {
    await openDeadJob('admin/jobs');
    expect(await page.locator('#panel-attempts li').first().textContent()).toContain('Error: Sync failed');
    expect(await page.locator('#panel-attempts .stack').count()).toBe(0);
    // Strings run in the page (this project's types have no DOM).
    const everything = String(await page.evaluate('document.documentElement.outerHTML'));
    expect(everything).not.toMatch(/hunter2|10\.0\.0\.5|Caused by/);
  });

  it('shows the stack and its causes with showStacks: as text, wrapped, scrollable, kept open across refreshes', async () => {
    await openDeadJob('debug/jobs');
    const stack = page.locator('#panel-attempts .stack');
    expect(await stack.count()).toBe(1);
    const text = stack.locator('pre');
    // Folded until asked for: the panel stays short with many attempts.
    expect(await text.isVisible()).toBe(false);
    await stack.locator('summary').click();
    await text.waitFor({ state: 'visible', timeout: EXPECT_TIMEOUT });
    const shown = (await text.textContent()) ?? '';
    expect(shown).toMatch(/^Error: Sync failed\n\s+at /);
    expect(shown).toContain(`Caused by: Error: ${SECRET_CAUSE}`);
    // Text, never markup: the cause's tags are characters, not elements, and its handler never ran.
    expect(await text.evaluate((pre) => pre.childElementCount)).toBe(0);
    expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
    const style = "getComputedStyle(document.querySelector('#panel-attempts .stack pre'))";
    expect(await page.evaluate(`[${style}.whiteSpace, ${style}.overflowY]`)).toEqual(['pre-wrap', 'auto']);
    // An auto-refresh re-reads the job every 3 s; the stack being read stays open.
    const updated = await page.locator('#updated').textContent();
    await waitFor(async () => (await page.locator('#updated').textContent()) !== updated, 'an auto-refresh');
    expect(await page.evaluate("document.querySelector('#panel-attempts .stack').open")).toBe(true);
    expect(await text.isVisible()).toBe(true);
  });
});
