// A plain CommonJS NestJS 11 app (no TypeScript, decorators applied by hand) that uses the built package.
// Usage: node app.cjs <mongodb uri> <database name>; prints one JSON line with what it saw.
require('reflect-metadata');
const { Injectable, Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { MongooseModule } = require('@nestjs/mongoose');
const { JobsModule, JobsService, JobHandler } = require('nestjs-mongo-jobs');

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
  ],
  providers: [Handlers],
})(AppModule);

(async () => {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error'] });
  const jobs = app.get(JobsService);
  const job = await jobs.enqueue('hello', { from: 'nest 11 cjs' });
  const seen = await finished;
  let row = await jobs.findById(job.id);
  while (row.status !== 'completed') {
    await new Promise((r) => setTimeout(r, 20));
    row = await jobs.findById(job.id);
  }
  const nest = require('@nestjs/core/package.json').version;
  const mongoose = require('mongoose/package.json').version;
  await app.close();
  console.log(JSON.stringify({ seen, status: row.status, nest, mongoose }));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
