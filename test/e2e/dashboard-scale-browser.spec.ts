import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { getConnectionToken, MongooseModule } from '@nestjs/mongoose';
import type { Connection } from 'mongoose';
import { type Browser, chromium, type Page } from 'playwright-core';
import { JobsModule } from '../../lib';
import { JobsDashboardModule } from '../../lib/dashboard';
import { waitFor } from '../support/jobs-app';
import { storedJobRow } from '../support/stored-job-row';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

/** Debian's `chromium` package (`.ci/run` installs it); a missing browser fails this file, it never skips it. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const JOBS = 20_000;
const STATUSES = ['completed', 'completed', 'completed', 'dead', 'failed', 'cancelled', 'pending'] as const;
const NAMES = ['mail.send', 'report.build', 'image.resize', 'invoice.sync'];
const REFRESHES = 3;

/**
 * The page over 20,000 jobs, in Chromium: it loads, lists, counts and refreshes. Prints the size of its assets
 * (gzipped) and how long each refresh took in the browser: figures, not timed assertions.
 */
describe('dashboard page over 20,000 jobs, in a real headless Chromium', () => {
  let browser: Browser;
  let app: INestApplication;
  let url: string;
  let page: Page;

  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    @Module({
      imports: [
        MongooseModule.forRoot(testMongoUri(), { dbName: uniqueDatabaseName('dashboard-scale-browser') }),
        JobsModule.forRoot({ worker: false }),
        JobsDashboardModule.forRoot({ path: 'admin/jobs', allowAnonymous: true }),
      ],
    })
    class AppModule {}
    app = await NestFactory.create(AppModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as { port: number };
    url = `http://127.0.0.1:${port}/admin/jobs`;
    const jobs = app.get<Connection>(getConnectionToken()).collection('jobs');
    const finishedOver = 3_600_000;
    for (let from = 0; from < JOBS; from += 2_000) {
      const rows = Array.from({ length: 2_000 }, (_, i) => {
        const n = from + i;
        const status = STATUSES[n % STATUSES.length];
        const at = new Date(Date.now() - Math.floor((n / JOBS) * finishedOver));
        return storedJobRow({
          name: NAMES[n % NAMES.length],
          status,
          payload: { n },
          attemptCount: status === 'dead' ? 5 : 0,
          ...(status === 'pending' ? { finishedAt: undefined, runAt: new Date(Date.now() + 86_400_000) } : {}),
          updatedAt: at,
          finishedAt: status === 'pending' ? undefined : at,
        });
      });
      await jobs.insertMany(rows as never[], { ignoreUndefined: true });
    }
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it('lists, counts and refreshes 20,000 jobs, with the refresh time and asset size printed', async () => {
    await page.goto(url);
    await page.locator('#jobs tbody tr').first().waitFor({ timeout: 30_000 });
    // The status tabs count the whole collection.
    const all = page.locator('#status-tabs [data-status=""] .count');
    await waitFor(async () => (await all.textContent()) === String(JOBS), 'the count of every job', 30_000);
    const dead = Array.from({ length: JOBS }, (_, n) => STATUSES[n % STATUSES.length]).filter((s) => s === 'dead');
    expect(await page.locator('#status-tabs [data-status="dead"] .count').textContent()).toBe(String(dead.length));

    // One refresh, in the browser's own clock: from the start of its metrics request to the "Updated" line changing.
    await page.evaluate(`(() => {
      window.refreshesDone = [];
      new MutationObserver(() => window.refreshesDone.push(performance.now()))
        .observe(document.getElementById('updated'), { childList: true, characterData: true, subtree: true });
    })()`);
    await waitFor(
      async () => ((await page.evaluate('window.refreshesDone.length')) as number) >= REFRESHES,
      `${REFRESHES} refreshes`,
      120_000,
    );
    const took = (await page.evaluate(`window.refreshesDone.slice(0, ${REFRESHES}).map((done) => {
      const starts = performance.getEntriesByType('resource')
        .filter((entry) => entry.name.includes('/api/metrics') && entry.startTime < done)
        .map((entry) => entry.startTime);
      return Math.round(done - Math.max(...starts));
    })`)) as number[];
    expect(await page.locator('#updated').textContent()).toMatch(/^Updated /);

    let gzipped = 0;
    for (const path of ['', 'assets/dashboard.js', 'assets/dashboard.css']) {
      gzipped += gzipSync(Buffer.from(await (await fetch(`${url}/${path}`)).arrayBuffer())).length;
    }
    process.stdout.write(
      `\n  dashboard over ${JOBS.toLocaleString('en')} jobs: refreshes took ${took.join(', ')} ms in the browser; ` +
        `page and assets ${gzipped.toLocaleString('en')} bytes gzipped\n`,
    );
    expect(await page.locator('#jobs tbody tr').count()).toBeGreaterThan(0);
  });
});
