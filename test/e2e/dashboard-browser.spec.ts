import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { getConnectionToken, MongooseModule } from '@nestjs/mongoose';
import type { Connection } from 'mongoose';
import { type Browser, chromium, type Page } from 'playwright-core';
import { JobHandler, JobsModule, JobsService } from '../../lib';
import { JobsDashboardModule } from '../../lib/dashboard';
import { waitFor } from '../support/jobs-app';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** Debian's `chromium` package (`.ci/run` installs it); a missing browser fails this file, it never skips it. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const EXPECT_TIMEOUT = 10_000;
/** The screenshots of docs/operations.md are refreshed with `UPDATE_SCREENSHOTS=1`; other runs keep theirs out of the tree. */
const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS === '1' ? 'docs' : join(tmpdir(), 'nestjs-mongo-jobs-screenshots');

/** Fails while `broken` is set: its first run goes dead (one attempt), a retry after the "fix" completes. */
@Injectable()
class InvoiceHandlers {
  static broken = true;

  @JobHandler('send-invoice', { maxAttempts: 1 })
  async send(): Promise<{ sent: true }> {
    if (InvoiceHandlers.broken) throw new Error('SMTP relay refused the connection');
    return { sent: true };
  }
}

async function startApp(dbName: string, workerId: string): Promise<{ app: INestApplication; url: string }> {
  @Module({
    imports: [
      MongooseModule.forRoot(testMongoUri(), { dbName }),
      JobsModule.forRoot({ workerId, pollIntervalMs: 100 }),
      JobsDashboardModule.forRoot({ path: 'admin/jobs', allowAnonymous: true }),
    ],
    providers: [InvoiceHandlers],
  })
  class AppModule {}
  const app = await NestFactory.create(AppModule, { logger: false });
  app.enableShutdownHooks();
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  return { app, url: `http://127.0.0.1:${port}/admin/jobs` };
}

describe('dashboard page in a real headless Chromium', () => {
  const dbName = uniqueDatabaseName('dashboard-browser');
  let browser: Browser;
  let first: { app: INestApplication; url: string };
  let page: Page;

  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    first = await startApp(dbName, 'web-1');
    page = await browser.newPage();
  });

  afterAll(async () => {
    await browser?.close();
    await first?.app.close();
  });

  it('shows a dead job, filters to it, opens it, retries it and sees it completed without reloading', async () => {
    const jobs = first.app.get(JobsService);
    const deadId = (await jobs.enqueue('send-invoice', { invoice: 7 }, { dedupeKey: 'invoice-7' })).id;
    // A second job of the same name that stays pending: the filter has something to leave out.
    await jobs.enqueue('send-invoice', { invoice: 8 }, { runAt: new Date(Date.now() + 3_600_000) });
    await waitFor(async () => (await jobs.findById(deadId))?.status === 'dead', 'the first run to go dead');

    await page.goto(first.url);
    // Counts: one dead send-invoice, as a link that filters the list.
    const deadCount = page.locator('#counts [data-key="send-invoice/dead"]');
    await deadCount.waitFor({ timeout: EXPECT_TIMEOUT });
    expect(await deadCount.textContent()).toBe('1');

    // Filter to dead jobs with the form, by keyboard; the filter lands in the URL.
    await page.getByLabel('Status', { exact: true }).selectOption('dead');
    await page.getByLabel('Name', { exact: true }).fill('send-invoice');
    await page.getByLabel('Name', { exact: true }).press('Enter');
    await page.waitForURL(/status=dead/, { timeout: EXPECT_TIMEOUT });
    expect(new URL(page.url()).searchParams.get('name')).toBe('send-invoice');
    const rows = page.locator('#jobs tbody tr');
    await waitFor(
      async () => (await rows.count()) === 1 && (await rows.first().getAttribute('data-id')) === deadId,
      'the list filtered to the dead job',
    );

    // Open it: the panel shows its status and the failed attempt's error.
    await page.getByRole('link', { name: `Open job ${deadId}` }).click();
    const panel = page.locator('#panel');
    await panel.getByText('SMTP relay refused the connection').first().waitFor({ timeout: EXPECT_TIMEOUT });
    expect(await panel.locator('.status').first().textContent()).toBe('dead');
    expect(new URL(page.url()).searchParams.get('job')).toBe(deadId);
    await page.emulateMedia({ colorScheme: 'light' });
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: join(SCREENSHOTS, 'dashboard-light.png'), fullPage: true });
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.screenshot({ path: join(SCREENSHOTS, 'dashboard-dark.png'), fullPage: true });
    expect(await page.evaluate('getComputedStyle(document.body).backgroundColor')).toBe('rgb(18, 22, 29)');

    // Fix the cause, press Retry: auto-refresh shows it completed, with no reload (a marker on window survives).
    InvoiceHandlers.broken = false;
    await page.evaluate(() => Object.assign(globalThis, { notReloaded: true }));
    await panel.getByRole('button', { name: 'Retry' }).click();
    await panel.locator('.status-completed').first().waitFor({ timeout: EXPECT_TIMEOUT });
    expect(await page.evaluate(() => (globalThis as { notReloaded?: boolean }).notReloaded)).toBe(true);
    expect((await jobs.findById(deadId))?.status).toBe('completed');

    // The panel's timeline runs from created to finished, in order, with the failed attempt in between.
    const timeline = panel.locator('#panel-timeline li');
    await panel.locator('#panel-timeline li[data-event="finished"]').waitFor({ timeout: EXPECT_TIMEOUT });
    const events = await timeline.evaluateAll((items) => items.map((item) => item.getAttribute('data-event')));
    expect(events[0]).toBe('created');
    expect(events).toContain('attempt');
    expect(events.at(-1)).toBe('finished');

    // The throughput chart counts the completion in its bucket (the current one when it finished; named by start so
    // a minute rolling over meanwhile cannot flake), and its caption sums the window by current status: the retried
    // row now counts as completed, no longer as dead.
    const finishedAt = (await jobs.findById(deadId))?.finishedAt?.getTime() ?? 0;
    const bucketStart = new Date(Math.floor(finishedAt / 60_000) * 60_000).toISOString();
    const bar = page.locator(`#throughput svg [data-start="${bucketStart}"] [data-status="completed"]`);
    await waitFor(
      async () => (await bar.count()) === 1 && Number(await bar.getAttribute('data-count')) >= 1,
      'the completion in its bucket of the chart',
    );
    expect(await page.locator('#throughput figcaption').textContent()).toMatch(/\b1 completed, 0 failed, 0 dead\b/);
    expect(await page.locator('#throughput svg').getAttribute('aria-label')).toMatch(/1 completed/);
  });

  it('lists both worker apps in the fleet and drops the one that shut down, without reloading', async () => {
    const second = await startApp(dbName, 'web-2');
    try {
      await page.goto(first.url);
      const fleet = page.locator('#fleet tbody tr[data-worker]');
      await waitFor(async () => (await fleet.count()) === 2, 'both workers in the fleet view');
      expect(await fleet.evaluateAll((rows) => rows.map((row) => row.getAttribute('data-worker')).sort())).toEqual([
        'web-1',
        'web-2',
      ]);
    } finally {
      await second.app.close();
    }
    const fleet = page.locator('#fleet tbody tr[data-worker]');
    await waitFor(async () => (await fleet.count()) === 1, 'the closed worker to leave the fleet view');
    expect(await fleet.first().getAttribute('data-worker')).toBe('web-1');
  });

  it('is usable from the keyboard: Enter on a focused job opens its panel, Escape closes it and returns focus', async () => {
    await page.goto(`${first.url}?status=completed`);
    const link = page.locator('#jobs tbody a[data-key]').first();
    await link.waitFor({ timeout: EXPECT_TIMEOUT });
    const id = await link.textContent();
    await link.focus();
    await page.keyboard.press('Enter');
    await page.locator('#panel-title', { hasText: `Job ${id}` }).waitFor({ timeout: EXPECT_TIMEOUT });
    expect(await page.evaluate('document.activeElement.id')).toBe('panel');
    await page.keyboard.press('Escape');
    expect(await page.locator('#panel').isHidden()).toBe(true);
    expect(await page.evaluate('document.activeElement.dataset.key')).toBe(id);
    expect(new URL(page.url()).searchParams.get('job')).toBeNull();
  });

  it("charts the whole queue's throughput when there are more names than the metrics answer charts one by one", async () => {
    // 25 names with a dead job each: the default answer carries buckets for 20 names only, and the completed
    // send-invoice (no failures) is not one of them; the chart must still count all 26 jobs.
    const at = new Date();
    const dead = Array.from({ length: 25 }, (_, i) => ({
      name: `tenant.${i}.sync`,
      payload: null,
      status: 'dead',
      runAt: at,
      attemptCount: 1,
      maxAttempts: 1,
      attempts: [],
      fencingToken: 0,
      finishedAt: at,
      createdAt: at,
      updatedAt: at,
    }));
    await first.app.get<Connection>(getConnectionToken()).collection('jobs').insertMany(dead);
    await page.goto(first.url);
    const caption = page.locator('#throughput figcaption');
    await waitFor(async () => /\b25 dead\b/.test((await caption.textContent()) ?? ''), 'the 25 dead jobs in the chart');
    expect(await caption.textContent()).toMatch(/\b1 completed, 0 failed, 25 dead\b/);
  });
});
