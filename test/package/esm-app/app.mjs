// A plain ES module NestJS 12 app (no TypeScript, decorators applied by hand) that imports every entry of the built
// package by its name, as an app that installed it does: the package's own exports map, through Node's
// self-reference (this file is inside the package). Usage: node app.mjs <mongodb uri> <database name>; prints one
// JSON line with what it saw.
import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MongooseModule } from '@nestjs/mongoose';

const ENTRIES = [
  'nestjs-mongo-jobs',
  'nestjs-mongo-jobs/testing',
  'nestjs-mongo-jobs/dashboard',
  'nestjs-mongo-jobs/health',
];
const [root, testing, dashboard, health] = await Promise.all(ENTRIES.map((entry) => import(entry)));
const { JobsModule, JobsService, JobHandler } = root;
const { JobsDashboardModule } = dashboard;
const { JobsHealthIndicator, JobsHealthModule } = health;

// Each entry's file, and whether its namespace is a real ES module's: CommonJS loaded by `import` has a `default`.
const entries = Object.fromEntries(
  ENTRIES.map((entry, i) => [
    entry,
    {
      file: fileURLToPath(import.meta.resolve(entry)),
      commonJsDefault: 'default' in [root, testing, dashboard, health][i],
    },
  ]),
);

let done;
const finished = new Promise((r) => (done = r));
class Handlers {
  hello(payload, ctx) {
    done({ payload, attempt: ctx.attempt, fencingToken: ctx.fencingToken });
  }
}
JobHandler('hello')(Handlers.prototype, 'hello', Object.getOwnPropertyDescriptor(Handlers.prototype, 'hello'));
Injectable()(Handlers);
class AppModule {}
Module({
  imports: [
    MongooseModule.forRoot(process.argv[2], { dbName: process.argv[3] }),
    JobsModule.forRoot({ pollIntervalMs: 50 }),
    // Anonymous only because this app listens on 127.0.0.1 for the test; a real app passes a guard.
    JobsDashboardModule.forRoot({ path: 'admin/jobs', allowAnonymous: true }),
    JobsHealthModule,
  ],
  providers: [Handlers],
})(AppModule);

const app = await NestFactory.create(AppModule, { logger: ['error'] });
try {
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${app.getHttpServer().address().port}/admin/jobs`;
  const jobs = app.get(JobsService);
  const job = await jobs.enqueue('hello', { from: 'nest 12 esm' });
  const seen = await finished;
  let row = await jobs.findById(job.id);
  while (row.status !== 'completed') {
    await new Promise((r) => setTimeout(r, 20));
    row = await jobs.findById(job.id);
  }
  // The page and one asset, read by the ES module build from the package's lib/dashboard/page/.
  const page = await fetch(base);
  const asset = await fetch(`${base}/assets/dashboard.js`);
  const shipped = readFileSync(new URL('../../../lib/dashboard/page/dashboard.js', import.meta.url));
  const served = Buffer.from(await asset.arrayBuffer());
  const html = await page.text();
  const healthy = await app.get(JobsHealthIndicator).isHealthy('jobs');
  const context = testing.createTestJobContext({ attempt: 2 });

  // Every file of the package this process loaded as CommonJS (Node records them in require's cache even when they
  // were reached through `import`): the ES module build loads none of the CommonJS build's.
  const packageRoot = fileURLToPath(new URL('../../../', import.meta.url));
  const commonJsFiles = Object.keys(createRequire(import.meta.url).cache)
    .filter((file) => file.startsWith(packageRoot) && !file.includes('/node_modules/'))
    .map((file) => file.slice(packageRoot.length));
  console.log(
    JSON.stringify({
      entries: Object.fromEntries(
        Object.entries(entries).map(([entry, { file, commonJsDefault }]) => [
          entry,
          { file: file.slice(packageRoot.length), commonJsDefault },
        ]),
      ),
      commonJsFiles,
      seen,
      status: row.status,
      dashboard: {
        page: page.status,
        pageType: page.headers.get('content-type'),
        baseHref: /<base href="([^"]*)">/.exec(html)?.[1],
        asset: asset.status,
        assetMatchesShipped: served.equals(shipped),
      },
      health: healthy.jobs.status,
      testingAttempt: context.attempt,
      nest: createRequire(import.meta.url)('@nestjs/core/package.json').version,
    }),
  );
} finally {
  await app.close();
}
