import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { getConnectionToken, MongooseModule } from '@nestjs/mongoose';
import type { Connection } from 'mongoose';
import { type Browser, chromium, type Dialog, type Page } from 'playwright-core';
import { JobHandler, JobsModule, JobsService } from '../../lib';
import { JobsDashboardModule } from '../../lib/dashboard';
import { waitFor } from '../support/jobs-app';
import { storedJobRow } from '../support/stored-job-row';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** Debian's `chromium` package (`.ci/run` installs it); a missing browser fails this file, it never skips it. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const DAY_MS = 86_400_000;
/**
 * Where to save the screenshots of `docs/operations.md` (`npm run docs:screenshots` sets it): the list, a job panel and
 * a bulk action, taken at the points of these tests that show them. Unset, nothing is written.
 */
const SCREENSHOTS = process.env.DASHBOARD_SCREENSHOTS;

@Injectable()
class Handlers {
  @JobHandler('act.noop')
  noop(): void {}

  @JobHandler('act.control')
  control(): void {}
}

/** A dead row on its last attempt unless `fields` say otherwise; its names have no handler here. */
const row = (fields: Record<string, unknown>) => storedJobRow({ status: 'dead', attemptCount: 5, ...fields });

async function startApp(label: string, readOnly: boolean): Promise<{ app: INestApplication; url: string }> {
  @Module({
    imports: [
      MongooseModule.forRoot(testMongoUri(), { dbName: uniqueDatabaseName(label) }),
      JobsModule.forRoot({ pollIntervalMs: 50 }),
      JobsDashboardModule.forRoot({ path: 'admin/jobs', allowAnonymous: true, readOnly }),
    ],
    providers: [Handlers],
  })
  class AppModule {}
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  return { app, url: `http://127.0.0.1:${port}/admin/jobs` };
}

/** The dashboard's actions (issue 32): run now, bulk retry, purge by age, progress bars; none under `readOnly`. */
describe('dashboard actions, in a real headless Chromium', () => {
  let browser: Browser;
  let app: INestApplication;
  let url: string;
  let page: Page;
  let jobs: JobsService;
  const collection = () => app.get<Connection>(getConnectionToken()).collection('jobs');
  const insert = (docs: Record<string, unknown>[]) => collection().insertMany(docs as never[]);
  /** Every text the bulk status line showed, in order (recorded in the page, so no intermediate one is missed). */
  const bulkMessages = () => page.evaluate('window.bulkMessages') as Promise<string[]>;
  /** Answers the next confirm() dialog, and returns its text. */
  const answerNextDialog = (accept: boolean) =>
    new Promise<string>((resolve) =>
      page.once('dialog', (dialog: Dialog) => {
        resolve(dialog.message());
        void (accept ? dialog.accept() : dialog.dismiss());
      }),
    );

  /** Saves the page (or one part of it) as `<name>.png` when SCREENSHOTS is set. */
  const screenshot = async (name: string, part?: string) => {
    if (!SCREENSHOTS) return;
    const path = `${SCREENSHOTS}/${name}.png`;
    await (part ? page.locator(part).screenshot({ path }) : page.screenshot({ path }));
  };

  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    ({ app, url } = await startApp('dashboard-actions-browser', false));
    jobs = app.get(JobsService);
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  async function openPage(query = ''): Promise<void> {
    await page.goto(`${url}${query}`);
    // Plain page script (the test's types have no DOM): records each text the bulk status line shows.
    await page.evaluate(`(() => {
      const messages = (window.bulkMessages = []);
      const line = document.getElementById('bulk-message');
      new MutationObserver(() => messages.push(line.textContent)).observe(line, {
        childList: true,
        characterData: true,
        subtree: true,
      });
    })()`);
  }

  it('runs a delayed job now from its panel: due at once, then run by a worker in its turn', async () => {
    const job = await jobs.enqueue('act.noop', {}, { delayMs: 3_600_000 });
    await openPage(`?job=${job.id}`);
    const promote = page.locator('#promote');
    await promote.waitFor({ state: 'visible' });
    await screenshot('dashboard-job-panel', '#panel');
    await promote.click();
    await waitFor(
      async () => ((await page.locator('#panel-message').textContent()) ?? '').startsWith('Due now'),
      'the panel to say the job is due now',
    );
    await waitFor(async () => (await jobs.findById(job.id))?.status === 'completed', 'the promoted job to run');
    // Not offered once the job is no longer pending.
    await waitFor(async () => await promote.isHidden(), 'Run now to go once the job completed');
  });

  it('shows the progress of running jobs as bars: a percentage, or done of total; other shapes as JSON only', async () => {
    const running = (progress: unknown) =>
      row({
        name: 'act.progress',
        status: 'running',
        attemptCount: 0,
        lockedBy: 'elsewhere#1',
        lockedUntil: new Date(Date.now() + DAY_MS),
        progress,
      });
    const { insertedIds } = await insert([running(40), running({ done: 3, total: 12 }), running('copying')]);
    const [percent, fraction, text] = Object.values(insertedIds).map(String);
    await openPage('?name=act.progress');
    const bar = (id: string) => page.locator(`#jobs tr[data-id="${id}"] progress`);
    await bar(percent).waitFor();
    const valueAndMax = async (id: string) => [await bar(id).getAttribute('value'), await bar(id).getAttribute('max')];
    expect(await valueAndMax(percent)).toEqual(['40', '100']);
    expect(await valueAndMax(fraction)).toEqual(['3', '12']);
    expect(await page.locator(`#jobs tr[data-id="${fraction}"]`).textContent()).toContain('3 of 12');
    expect(await bar(text).count()).toBe(0);
    // In the panel: the bar, and the JSON of a progress that is not one.
    await page.locator(`#jobs [data-key="${fraction}"]`).click();
    await page.locator('#panel-fields progress').waitFor();
    expect(await page.locator('#panel-fields').textContent()).toContain('3 of 12');
    await screenshot('dashboard-list', '#jobs');
    await page.locator(`#jobs [data-key="${text}"]`).click();
    await waitFor(
      async () => ((await page.locator('#panel-fields').textContent()) ?? '').includes('"copying"'),
      'JSON',
    );
    expect(await page.locator('#panel-fields progress').count()).toBe(0);
  });

  it('retries every dead job of a name after a confirmation, over several bounded calls, showing its progress', async () => {
    // More than one call's bound (1,000): the page calls again while the answer says `more`.
    await insert([
      ...Array.from({ length: 1_005 }, () => row({ name: 'act.bulk' })),
      row({ name: 'act.other' }),
      row({ name: 'act.bulk', status: 'failed' }),
    ]);
    await openPage();
    await page.locator('#bulk-retry-name option[value="act.bulk"]').waitFor({ state: 'attached' });
    await page.selectOption('#bulk-retry-name', 'act.bulk');
    await page.selectOption('#bulk-retry-status', 'dead');
    await waitFor(async () => (await page.locator('#bulk-retry-count').textContent()) === '1005 jobs', 'the count');

    // Dismissed: nothing is retried.
    const dismissed = answerNextDialog(false);
    await page.locator('#bulk-retry button[type=submit]').click();
    expect(await dismissed).toBe('Retry all 1005 dead jobs of "act.bulk"? Each becomes pending and runs again.');
    expect(await collection().countDocuments({ name: 'act.bulk', status: 'dead' })).toBe(1_005);

    const accepted = answerNextDialog(true);
    await page.locator('#bulk-retry button[type=submit]').click();
    await accepted;
    await waitFor(
      async () => (await page.locator('#bulk-message').textContent()) === 'Retried 1005 of 1005 dead jobs of act.bulk.',
      'the bulk retry to finish',
      60_000,
    );
    expect(await bulkMessages()).toContain('Retried 1000 of 1005 dead jobs of act.bulk…');
    await screenshot('dashboard-bulk-retry', '#bulk');
    expect(await collection().countDocuments({ name: 'act.bulk', status: 'pending' })).toBe(1_005);
    // Only that name and that status.
    expect(await collection().countDocuments({ name: 'act.other', status: 'dead' })).toBe(1);
    expect(await collection().countDocuments({ name: 'act.bulk', status: 'failed' })).toBe(1);
  }, 90_000);

  it('deletes finished jobs of a status and name older than an age, after a confirmation naming them', async () => {
    const ago = (days: number) => new Date(Date.now() - days * DAY_MS);
    await insert([
      ...[10, 9, 8].map((days) => row({ name: 'act.old', status: 'completed', finishedAt: ago(days) })),
      ...[2, 1].map((days) => row({ name: 'act.old', status: 'completed', finishedAt: ago(days) })),
      row({ name: 'act.old', status: 'dead', finishedAt: ago(10) }),
      row({ name: 'act.kept', status: 'completed', finishedAt: ago(10) }),
    ]);
    await openPage();
    await page.locator('#bulk-purge-name option[value="act.old"]').waitFor({ state: 'attached' });
    await page.selectOption('#bulk-purge-status', 'completed');
    await page.selectOption('#bulk-purge-name', 'act.old');
    await page.fill('#bulk-purge-age', '7');
    await page.selectOption('#bulk-purge-unit', String(DAY_MS));
    const dialog = answerNextDialog(true);
    await page.locator('#bulk-purge button[type=submit]').click();
    expect(await dialog).toMatch(
      /^Delete all completed jobs of "act\.old" finished before .+\? This cannot be undone\.$/,
    );
    await waitFor(
      async () => ((await page.locator('#bulk-message').textContent()) ?? '').startsWith('Deleted 3 completed jobs'),
      'the purge to finish',
    );
    expect(await collection().countDocuments({ name: 'act.old', status: 'completed' })).toBe(2);
    expect(await collection().countDocuments({ name: 'act.old', status: 'dead' })).toBe(1);
    expect(await collection().countDocuments({ name: 'act.kept' })).toBe(1);
  });

  it('pauses a name after a confirmation and resumes it: its jobs wait, then run', async () => {
    await jobs.enqueue('act.noop', {});
    await openPage();
    const pause = page.locator('#counts [data-key="act.noop/pause"]');
    await pause.waitFor();
    const dialog = answerNextDialog(true);
    await pause.click();
    expect(await dialog).toMatch(/^Pause "act\.noop" on every worker\?/);
    const resume = page.locator('#counts [data-key="act.noop/resume"]');
    await resume.waitFor();
    expect(await jobs.pausedNames()).toEqual([{ name: 'act.noop', pausedAt: expect.any(Date) }]);
    const row = page.locator('#counts tr', { has: page.locator('[data-key="act.noop/resume"]') });
    expect(await row.locator('.status-paused').textContent()).toBe('paused');
    // Enqueued while paused: it waits (the control job of another name runs meanwhile, so the worker is polling).
    const waiting = await jobs.enqueue('act.noop', {});
    const control = await jobs.enqueue('act.control', {});
    await waitFor(async () => (await jobs.findById(control.id))?.status === 'completed', 'the control job');
    expect(await jobs.findById(waiting.id)).toMatchObject({ status: 'pending' });
    await resume.click(); // no confirmation: resuming lets work go on
    await pause.waitFor();
    expect(await jobs.pausedNames()).toEqual([]);
    await waitFor(async () => (await jobs.findById(waiting.id))?.status === 'completed', 'the resumed job');
  });

  it('lists a paused name with no jobs, so that it can be resumed', async () => {
    await jobs.pause('act.nothing-yet');
    await openPage();
    const resume = page.locator('#counts [data-key="act.nothing-yet/resume"]');
    await resume.waitFor();
    await resume.click();
    await waitFor(async () => (await jobs.pausedNames()).length === 0, 'the resume');
    await waitFor(async () => (await resume.count()) === 0, 'the row to go');
  });

  it('shows what the handlers logged in the job panel, as text, and says when older lines were dropped', async () => {
    const at = new Date();
    const logs = [
      { at, attempt: 1, message: 'fetching <img src=x onerror="window.pwned=1">' },
      { at, attempt: 2, message: 'done' },
    ];
    const { insertedIds } = await insert([row({ name: 'act.logged', status: 'completed', logs, logCount: 250 })]);
    const id = String(insertedIds[0]);
    await openPage(`?job=${id}`);
    await page.locator('#panel-logs li').nth(1).waitFor();
    expect(await page.locator('#panel-logs li').allTextContents()).toEqual([
      expect.stringContaining('#1 fetching <img src=x onerror="window.pwned=1">'),
      expect.stringContaining('#2 done'),
    ]);
    expect(await page.locator('#panel-logs img').count()).toBe(0);
    expect(await page.evaluate('window.pwned')).toBeUndefined();
    expect(await page.locator('#panel-logs-note').isVisible()).toBe(true);
  });

  it('offers no action under readOnly: no bulk forms, no Run now', async () => {
    const readOnly = await startApp('dashboard-actions-browser-ro', true);
    try {
      const job = await readOnly.app.get(JobsService).enqueue('act.noop', {}, { delayMs: 3_600_000 });
      const roPage = await browser.newPage();
      await roPage.goto(`${readOnly.url}?job=${job.id}`);
      await roPage.locator('#panel-fields dt').first().waitFor();
      expect(await roPage.locator('#bulk').isHidden()).toBe(true);
      expect(await roPage.locator('#promote').isHidden()).toBe(true);
      // The pause state shows, without a button.
      await roPage.locator('#counts .status-claimed').first().waitFor();
      expect(await roPage.locator('#counts button[data-key$="/pause"]').count()).toBe(0);
      await roPage.close();
    } finally {
      await readOnly.app.close();
    }
  });
});
