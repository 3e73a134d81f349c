import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { getConnectionToken, MongooseModule } from '@nestjs/mongoose';
import { type Connection, Types } from 'mongoose';
import { type Browser, chromium, type Page } from 'playwright-core';
import { JobHandler, JobsModule } from '../../lib';
import { JobsDashboardModule } from '../../lib/dashboard';
import { waitFor } from '../support/jobs-app';
import { storedJobRow } from '../support/stored-job-row';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** Debian's `chromium` package (`.ci/run` installs it); a missing browser fails this file, it never skips it. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const EXPECT_TIMEOUT = 10_000;
/** Long enough to push every other column off a 1280 px screen if a cell took its full width. */
const LONG_WORKER_ID = `worker-${'w'.repeat(190)}`;
const LONG_NAME = `tenant.${'n'.repeat(190)}`;
const LONG_ID = `import-${'i'.repeat(290)}`;

@Injectable()
class Handlers {
  @JobHandler('ops.noop')
  noop(): void {}
}

const row = storedJobRow;

/** The dashboard page as operators use it: loaded rows, long values, links, runs, the chart, the console, tabs. */
describe('dashboard page for operators, in a real headless Chromium', () => {
  let browser: Browser;
  let app: INestApplication;
  let url: string;
  let page: Page;
  const insert = (docs: Record<string, unknown>[]) =>
    app
      .get<Connection>(getConnectionToken())
      .collection('jobs')
      .insertMany(docs as never[]);

  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    @Module({
      imports: [
        MongooseModule.forRoot(testMongoUri(), { dbName: uniqueDatabaseName('dashboard-operator-browser') }),
        JobsModule.forRoot({ workerId: LONG_WORKER_ID, pollIntervalMs: 100 }),
        JobsDashboardModule.forRoot({ path: 'admin/jobs', allowAnonymous: true }),
      ],
      providers: [Handlers],
    })
    class AppModule {}
    app = await NestFactory.create(AppModule, { logger: false });
    app.enableShutdownHooks();
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as { port: number };
    url = `http://127.0.0.1:${port}/admin/jobs`;
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  /** Resolves once the page has refreshed itself (the "Updated …" line changed) after this call. */
  async function nextRefresh(): Promise<void> {
    const before = await page.locator('#updated').textContent();
    await waitFor(async () => (await page.locator('#updated').textContent()) !== before, 'an auto-refresh');
  }

  it('keeps every row loaded with "Load more" past 200, and the keyboard focus, across auto-refreshes', async () => {
    // Distinct creation instants: the list is newest first, so the last row is the oldest.
    const base = Date.now() - 3_600_000;
    await insert(
      Array.from({ length: 230 }, (_, i) => row({ name: 'bulk.row', createdAt: new Date(base + i * 1000) })),
    );
    await page.goto(`${url}?name=bulk.row`);
    const rows = page.locator('#jobs tbody tr[data-id]');
    await waitFor(async () => (await rows.count()) === 50, 'the first page');
    for (const shown of [100, 150, 200, 230]) {
      await page.locator('#more').click();
      await waitFor(async () => (await rows.count()) === shown, `${shown} rows after "Load more"`);
    }
    expect(await page.locator('#more').isHidden()).toBe(true);
    // The button that had focus is gone: focus moves to the first row it loaded, not to the page.
    expect(await page.evaluate('document.activeElement.tagName')).not.toBe('BODY');

    const last = rows.last();
    const lastId = await last.getAttribute('data-id');
    await last.locator('[data-key]').focus();
    await nextRefresh();
    await nextRefresh();
    expect(await rows.count()).toBe(230);
    expect(await rows.last().getAttribute('data-id')).toBe(lastId);
    expect(await page.evaluate('document.activeElement.dataset.key')).toBe(lastId);
  });

  it('truncates a long id, name or worker id with the full text in its title, so every column stays on screen', async () => {
    await insert([row({ _id: LONG_ID, name: LONG_NAME, status: 'failed', dedupeKey: 'long-one' })]);
    await page.goto(`${url}?name=${LONG_NAME}`);
    const jobRow = page.locator('#jobs tbody tr[data-id]');
    await jobRow.first().waitFor({ timeout: EXPECT_TIMEOUT });
    await page.locator('#fleet tbody tr[data-worker]').first().waitFor({ timeout: EXPECT_TIMEOUT });
    const viewport = 1280;
    for (const table of ['#counts', '#jobs', '#fleet']) {
      // The table fits its box (no horizontal scroll) and its last column is on screen.
      const [scroll, client] = (await page.evaluate(
        `[document.querySelector('${table}').parentElement.scrollWidth, document.querySelector('${table}').parentElement.clientWidth]`,
      )) as [number, number];
      expect(scroll).toBeLessThanOrEqual(client);
      const lastCell = page.locator(`${table} tbody tr:first-child > :last-child`);
      const box = await lastCell.boundingBox();
      expect((box?.x ?? Number.POSITIVE_INFINITY) + (box?.width ?? 0)).toBeLessThanOrEqual(viewport);
    }
    // The full values stay available: as the truncated element's title.
    expect(await page.locator(`#jobs tbody [title="${LONG_ID}"]`).count()).toBe(1);
    expect(await page.locator(`#jobs tbody [title="${LONG_NAME}"]`).count()).toBe(1);
    expect(await page.locator(`#counts tbody [title="${LONG_NAME}"]`).count()).toBe(1);
    expect(await page.locator(`#fleet tbody [title="${LONG_WORKER_ID}"]`).count()).toBe(1);
  });

  it('offers no Retry or Cancel on a row whose string id the library cannot run, and says why', async () => {
    await insert([row({ _id: 'legacy-import-42', name: 'legacy.import', status: 'failed' })]);
    await page.goto(`${url}?name=legacy.import`);
    await page.locator('#jobs [data-key="legacy-import-42"]').click();
    await page.locator('#panel-title', { hasText: 'Job legacy-import-42' }).waitFor({ timeout: EXPECT_TIMEOUT });
    expect(await page.locator('#retry').isHidden()).toBe(true);
    expect(await page.locator('#cancel').isHidden()).toBe(true);
    expect(await page.locator('#panel-message').textContent()).toMatch(/not an ObjectId/);
    // The whole id, however long, is one click from the clipboard.
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write']);
    await page.getByRole('button', { name: 'Copy id' }).click();
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe('legacy-import-42');
  });

  it('makes each job id a link: a middle click opens the job in a new tab, its panel open', async () => {
    const id = new Types.ObjectId();
    await insert([row({ _id: id, name: 'linked.job', status: 'dead', attemptCount: 5 })]);
    await page.goto(`${url}?name=linked.job`);
    const link = page.getByRole('link', { name: `Open job ${id}` });
    await link.waitFor({ timeout: EXPECT_TIMEOUT });
    const href = await link.getAttribute('href');
    expect(new URL(href ?? '', page.url()).searchParams.get('job')).toBe(String(id));
    const [tab] = await Promise.all([page.context().waitForEvent('page'), link.click({ button: 'middle' })]);
    try {
      await tab.locator('#panel-title', { hasText: `Job ${id}` }).waitFor({ timeout: EXPECT_TIMEOUT });
      expect(await tab.locator('#panel .status').first().textContent()).toBe('dead');
    } finally {
      await tab.close();
    }
    // A plain click still opens the panel in place, without loading the page again.
    await page.evaluate(() => Object.assign(globalThis, { notReloaded: true }));
    await link.click();
    await page.locator('#panel-title', { hasText: `Job ${id}` }).waitFor({ timeout: EXPECT_TIMEOUT });
    expect(await page.evaluate(() => (globalThis as { notReloaded?: boolean }).notReloaded)).toBe(true);
    expect(new URL(page.url()).searchParams.get('job')).toBe(String(id));
  });

  it('shows runs, not failures: a first-try success is 1 run, a success after two failures 3', async () => {
    const failure = { at: new Date(), error: 'boom', errorClass: 'Error' };
    const first = new Types.ObjectId();
    const third = new Types.ObjectId();
    const dead = new Types.ObjectId();
    await insert([
      row({ _id: first, name: 'runs.demo' }),
      row({ _id: third, name: 'runs.demo', attemptCount: 2, attempts: [failure, failure] }),
      row({ _id: dead, name: 'runs.demo', status: 'dead', attemptCount: 5, attempts: Array(5).fill(failure) }),
    ]);
    await page.goto(`${url}?name=runs.demo`);
    await page.locator('#jobs tbody tr[data-id]').nth(2).waitFor({ timeout: EXPECT_TIMEOUT });
    expect(await page.locator('#jobs thead th').nth(3).textContent()).toBe('Runs');
    const runs = async (id: Types.ObjectId) => page.locator(`#jobs tr[data-id="${id}"] td`).nth(3).textContent();
    expect(await runs(first)).toBe('1/5');
    expect(await runs(third)).toBe('3/5');
    expect(await runs(dead)).toBe('5/5');
    await page.locator(`#jobs [data-key="${third}"]`).click();
    await page.locator('#panel-fields', { hasText: 'Succeeded on run 3 of at most 5' }).waitFor({
      timeout: EXPECT_TIMEOUT,
    });
  });

  it('labels the throughput chart with a count axis and a time axis', async () => {
    await page.goto(url);
    const yAxis = page.locator('#throughput [data-axis="y"]');
    const xAxis = page.locator('#throughput [data-axis="x"]');
    await yAxis.waitFor({ timeout: EXPECT_TIMEOUT });
    expect(await yAxis.locator('.axis-title').textContent()).toBe('Jobs per 1 min');
    // The count axis runs from 0 to the highest bar; the time axis from the window's first bucket to now.
    const ticks = await yAxis.locator('.tick').allTextContents();
    expect(ticks.at(-1)).toBe('0');
    expect(Number(ticks[0])).toBeGreaterThanOrEqual(1);
    expect(await xAxis.locator('.axis-title').textContent()).toBe('Time');
    const times = await xAxis
      .locator('time')
      .evaluateAll((nodes) => nodes.map((node) => node.getAttribute('datetime')));
    expect(times.length).toBeGreaterThanOrEqual(2);
    const [from, to] = [Date.parse(times[0] ?? ''), Date.parse(times.at(-1) ?? '')];
    expect(to - from).toBeGreaterThanOrEqual(3_540_000);
    expect(Math.abs(Date.now() - to)).toBeLessThan(120_000);
  });

  it('loads and refreshes with a clean console: no error, no failed request (the favicon included)', async () => {
    const fresh = await browser.newPage();
    const problems: string[] = [];
    fresh.on('console', (message) => {
      if (message.type() === 'error' || message.type() === 'warning') problems.push(`console: ${message.text()}`);
    });
    fresh.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    fresh.on('requestfailed', (request) => problems.push(`failed: ${request.url()}`));
    fresh.on('response', (response) => {
      if (response.status() >= 400) problems.push(`${response.status()}: ${response.url()}`);
    });
    try {
      await fresh.goto(url);
      await fresh.locator('#jobs tbody tr').first().waitFor({ timeout: EXPECT_TIMEOUT });
      const before = await fresh.locator('#updated').textContent();
      await waitFor(async () => (await fresh.locator('#updated').textContent()) !== before, 'an auto-refresh');
      // Headless Chromium fetches no favicon on its own: load the icon a desktop browser would (the declared one, or
      // /favicon.ico without one) as an image, as the tab strip does, under the page's CSP.
      const icon = await fresh.evaluate(`new Promise((resolve) => {
        const image = new Image();
        image.onload = () => resolve('loaded');
        image.onerror = () => resolve('failed');
        image.src = document.querySelector('link[rel~="icon"]')?.href ?? new URL('/favicon.ico', location.href).href;
      })`);
      expect(icon).toBe('loaded');
      expect(problems).toEqual([]);
    } finally {
      await fresh.close();
    }
  });

  it('shows a tab per status with its count, for the name filtered on, and each tab filters the list', async () => {
    await insert([
      row({ name: 'tabs.demo', status: 'pending', runAt: new Date(Date.now() + 3_600_000), finishedAt: null }),
      row({ name: 'tabs.demo', status: 'pending', runAt: new Date(Date.now() + 3_600_000), finishedAt: null }),
      row({ name: 'tabs.demo', status: 'dead', attemptCount: 5 }),
      row({ name: 'tabs.demo' }),
      row({ name: 'tabs.demo' }),
      row({ name: 'tabs.demo' }),
    ]);
    await page.goto(`${url}?name=tabs.demo`);
    const tabs = page.getByRole('navigation', { name: 'Jobs by status' });
    const count = (status: string) => tabs.locator(`[data-status="${status}"] .count`);
    await tabs.waitFor({ timeout: EXPECT_TIMEOUT });
    await waitFor(async () => (await count('').textContent()) === '6', 'the tab counts');
    expect(await count('pending').textContent()).toBe('2');
    expect(await count('completed').textContent()).toBe('3');
    expect(await count('dead').textContent()).toBe('1');
    expect(await count('failed').textContent()).toBe('0');
    expect(await tabs.locator('[aria-current="page"]').getAttribute('data-status')).toBe('');

    await tabs.locator('[data-status="dead"]').click();
    await page.waitForURL(/status=dead/, { timeout: EXPECT_TIMEOUT });
    expect(new URL(page.url()).searchParams.get('name')).toBe('tabs.demo');
    const rows = page.locator('#jobs tbody tr[data-id]');
    await waitFor(async () => (await rows.count()) === 1, 'the list filtered to the dead job');
    expect(await tabs.locator('[aria-current="page"]').getAttribute('data-status')).toBe('dead');
    expect(await page.getByLabel('Status', { exact: true }).inputValue()).toBe('dead');
  });
});
