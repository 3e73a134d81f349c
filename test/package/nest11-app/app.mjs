// An ES module NestJS 11 app (NestJS 11 itself is CommonJS; decorators applied by hand): the package's `import`
// condition gives it the ES module build, whose named imports from NestJS 11 must resolve.
// Usage: node app.mjs <mongodb uri> <database name>; prints one JSON line with what it saw.
import 'reflect-metadata';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MongooseModule } from '@nestjs/mongoose';
import { JobHandler, JobsModule, JobsService } from 'nestjs-mongo-jobs';
import { JobsDashboardModule } from 'nestjs-mongo-jobs/dashboard';

let done;
const finished = new Promise((r) => (done = r));
class Handlers {
  hello(payload, ctx) {
    done({ payload, attempt: ctx.attempt });
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

const app = await NestFactory.create(AppModule, { logger: ['error'] });
try {
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${app.getHttpServer().address().port}/admin/jobs`;
  const jobs = app.get(JobsService);
  const job = await jobs.enqueue('hello', { from: 'nest 11 esm' });
  const seen = await finished;
  const row = await jobs.waitUntilFinished(job.id, { timeoutMs: 10_000 });
  const page = await fetch(base);
  const read = await fetch(`${base}/api/jobs/${job.id}`);
  const require = createRequire(import.meta.url);
  console.log(
    JSON.stringify({
      file: fileURLToPath(import.meta.resolve('nestjs-mongo-jobs')),
      seen,
      status: row.status,
      dashboard: { page: page.status, read: read.status },
      nest: require('@nestjs/core/package.json').version,
    }),
  );
} finally {
  await app.close();
}
