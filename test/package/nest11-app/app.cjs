// A plain CommonJS NestJS 11 app (no TypeScript, decorators applied by hand) that uses the built package and its
// dashboard subpath over HTTP.
// Usage: node app.cjs <mongodb uri> <database name>; prints one JSON line with what it saw.
require('reflect-metadata');
const { Injectable, Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { MongooseModule } = require('@nestjs/mongoose');
const { JobsModule, JobsService, JobHandler } = require('nestjs-mongo-jobs');
const { JobsDashboardModule } = require('nestjs-mongo-jobs/dashboard');

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
  ],
  providers: [Handlers],
})(AppModule);

(async () => {
  const app = await NestFactory.create(AppModule, { logger: ['error'] });
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${app.getHttpServer().address().port}/admin/jobs/api`;
  const jobs = app.get(JobsService);
  const job = await jobs.enqueue('hello', { from: 'nest 11 cjs' });
  const seen = await finished;
  let row = await jobs.findById(job.id);
  while (row.status !== 'completed') {
    await new Promise((r) => setTimeout(r, 20));
    row = await jobs.findById(job.id);
  }
  // The dashboard's routes, mounted under the path given to forRoot: a read, and a mutation without its header.
  const read = await fetch(`${base}/jobs/${job.id}`);
  const unsafe = await fetch(`${base}/jobs/${job.id}/retry`, { method: 'POST' });
  const dashboard = { read: read.status, job: (await read.json()).status, unsafe: unsafe.status };
  const nest = require('@nestjs/core/package.json').version;
  const mongoose = require('mongoose/package.json').version;
  await app.close();
  console.log(JSON.stringify({ seen, status: row.status, dashboard, nest, mongoose }));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
