// An ES module NestJS 12 app that also loads the package's CommonJS build, as when a CommonJS dependency of the app
// requires it: two copies of the package in one process. Usage: node dual-package.mjs <mongodb uri> <database name>;
// prints one JSON line with what it saw.
import 'reflect-metadata';
import { createRequire } from 'node:module';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { MongooseModule } from '@nestjs/mongoose';

const require = createRequire(import.meta.url);
const esm = await import('nestjs-mongo-jobs');
const cjs = require('nestjs-mongo-jobs');
const [uri, dbName] = process.argv.slice(2);

// A handler as the CommonJS dependency writes it: its decorator and its error come from the CommonJS copy.
class DependencyHandlers {
  refuse() {
    throw new cjs.UnrecoverableJobError('this payload can never succeed');
  }
}
cjs.JobHandler('dependency.refuse', { maxAttempts: 3, backoff: { baseMs: 10, maxMs: 10 } })(
  DependencyHandlers.prototype,
  'refuse',
  Object.getOwnPropertyDescriptor(DependencyHandlers.prototype, 'refuse'),
);
Injectable()(DependencyHandlers);

/** The app's JobsModule (ES module copy) runs the dependency's handler: found, and its unrecoverable error honoured. */
async function handlerFromTheOtherCopy() {
  class AppModule {}
  Module({
    imports: [MongooseModule.forRoot(uri, { dbName }), esm.JobsModule.forRoot({ pollIntervalMs: 50 })],
    providers: [DependencyHandlers],
  })(AppModule);
  const app = await NestFactory.create(AppModule, { logger: false });
  try {
    await app.init();
    const jobs = app.get(esm.JobsService);
    const { id } = await jobs.enqueue('dependency.refuse');
    const row = await jobs.waitUntilFinished(id, { timeoutMs: 10_000 });
    return { status: row.status, attemptCount: row.attemptCount, errorClass: row.attempts.at(-1)?.errorClass };
  } finally {
    await app.close();
  }
}

/** JobsModule from both copies in one app: two workers, refused at bootstrap as a double import is. */
async function jobsModuleFromBothCopies() {
  class AppModule {}
  Module({
    imports: [
      MongooseModule.forRoot(uri, { dbName }),
      esm.JobsModule.forRoot({ pollIntervalMs: 50 }),
      cjs.JobsModule.forRoot({ pollIntervalMs: 50 }),
    ],
  })(AppModule);
  const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
  try {
    await app.init();
    return { started: true };
  } catch (error) {
    return { started: false, error: error.name, message: error.message };
  } finally {
    await app.close().catch(() => undefined);
  }
}

console.log(
  JSON.stringify({
    twoCopies: esm.JobsModule !== cjs.JobsModule,
    files: { import: import.meta.resolve('nestjs-mongo-jobs'), require: require.resolve('nestjs-mongo-jobs') },
    handler: await handlerFromTheOtherCopy(),
    bothModules: await jobsModuleFromBothCopies(),
  }),
);
