import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { startTestMongoServer } from '../test/support/mongo-server';
import { AppModule } from './app.module';
import { startSampleTelemetry } from './telemetry';

/**
 * `npm run sample`: the sample app on MONGODB_URI, else an embedded MongoDB (mongodb-memory-server, else the
 * in-memory Java test server). Ctrl+C shuts down gracefully: running jobs finish or are released.
 * `JOBS_SAMPLE_TELEMETRY=console npm run sample` prints the jobs' OpenTelemetry spans and metrics.
 */
async function main(): Promise<void> {
  const mongo = await startTestMongoServer((line) => console.log(`[mongo] ${line}`));
  console.log(`[mongo] using ${mongo.description}`);
  const stopTelemetry = startSampleTelemetry(); // JOBS_SAMPLE_TELEMETRY=console; before the app boots
  const app = await NestFactory.create(AppModule.forUri(mongo.uri));
  // Without this Nest runs no shutdown hooks on SIGINT/SIGTERM, and running jobs would be cut off.
  app.enableShutdownHooks();
  await app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number }; // PORT=0 picks a free one
  const url = `http://127.0.0.1:${port}`;
  console.log(`Sample app listening on ${url}`);
  console.log(`Try: curl -s -X POST ${url}/jobs/hello -H 'content-type: application/json' -d '{"name":"Ada"}'`);
  console.log(`Then: curl -s ${url}/jobs/<id from the answer>   (and ${url}/jobs/stats)`);
  console.log(`Dashboard: ${url}/dashboard`);

  if (process.env.SAMPLE_EXIT_AFTER_BOOT) {
    // Smoke mode (tests, CI): boot, then shut down the way a signal would.
    await app.close();
    await stopTelemetry();
    await mongo.stop();
    console.log('Sample app stopped');
  }
  // On Ctrl+C Nest closes the app (jobs drain, then the connection closes) and exits; an embedded Java
  // server exits with us because it watches its stdin.
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
