/**
 * The code of the README's "Testing your jobs" section, run as it is written there. Only the imports differ
 * (`../../lib` for `nestjs-mongo-jobs`, `../../lib/testing` for `nestjs-mongo-jobs/testing`) and the database URI and
 * name come from the test harness: keep the two in step when either changes.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, HttpCode, type INestApplication, Injectable, Module, Param, Post } from '@nestjs/common';
import { MongooseModule } from '@nestjs/mongoose';
import { Test } from '@nestjs/testing';
import { JobCancelledError, type JobExecutionContext, JobHandler, JobsModule, JobsService } from '../../lib';
import { createTestJobContext } from '../../lib/testing';
import { testMongoUri, uniqueDatabaseName } from '../support/test-database';

const dbName = uniqueDatabaseName('testing-kit-readme');

// --- the application (README: "reports.ts") ---

@Injectable()
export class ReportStore {
  private readonly built = new Map<string, { chunks: number }>();
  save(reportId: string, chunks: number) {
    this.built.set(reportId, { chunks });
  }
  get(reportId: string) {
    return this.built.get(reportId);
  }
}

@Injectable()
export class ReportJobs {
  constructor(private readonly store: ReportStore) {}

  @JobHandler('report.build', { maxAttempts: 3 })
  async build(payload: { reportId: string; chunks: number }, ctx: JobExecutionContext) {
    for (let done = 1; done <= payload.chunks; done += 1) {
      ctx.signal.throwIfAborted(); // cancelled, timed out, lease lost or shutting down: stop here
      await ctx.updateProgress({ done, total: payload.chunks });
    }
    this.store.save(payload.reportId, payload.chunks);
  }
}

@Controller('reports')
export class ReportsController {
  constructor(private readonly jobs: JobsService) {}

  @Post(':id')
  @HttpCode(202)
  async request(@Param('id') id: string) {
    const job = await this.jobs.enqueue('report.build', { reportId: id, chunks: 3 });
    return { jobId: job.id };
  }
}

@Module({
  imports: [MongooseModule.forRoot(testMongoUri(), { dbName }), JobsModule.forRoot()],
  controllers: [ReportsController],
  providers: [ReportStore, ReportJobs],
})
export class AppModule {}

// --- README: "reports.spec.ts", a unit test of the handler (no MongoDB, no Nest) ---

describe('ReportJobs.build', () => {
  it('builds every chunk and reports its progress', async () => {
    const store = new ReportStore();
    const ctx = createTestJobContext({ name: 'report.build' });
    await new ReportJobs(store).build({ reportId: 'r1', chunks: 2 }, ctx);
    expect(store.get('r1')).toEqual({ chunks: 2 });
    expect(ctx.progressUpdates).toEqual([
      { done: 1, total: 2 },
      { done: 2, total: 2 },
    ]);
  });

  it('stops when it is cancelled', async () => {
    const store = new ReportStore();
    const ctx = createTestJobContext();
    ctx.abort(); // as jobs.cancel(id) would: the signal is aborted with a JobCancelledError
    await expect(new ReportJobs(store).build({ reportId: 'r1', chunks: 2 }, ctx)).rejects.toBeInstanceOf(
      JobCancelledError,
    );
    expect(store.get('r1')).toBeUndefined();
  });
});

// --- README: "reports.e2e-spec.ts", through HTTP and a real worker ---

describe('POST /reports/:id (e2e)', () => {
  let app: INestApplication;

  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
  });

  afterAll(() => app.close());

  it('builds the report in the background', async () => {
    const response = await fetch(`${await app.getUrl()}/reports/r1`, { method: 'POST' });
    expect(response.status).toBe(202);
    const { jobId } = (await response.json()) as { jobId: string };

    await app.get(JobsService).drain({ timeoutMs: 10_000 }); // every job this app runs, follow-ups and retries included

    expect(app.get(ReportStore).get('r1')).toEqual({ chunks: 3 });
    expect(await app.get(JobsService).findById(jobId)).toMatchObject({ status: 'completed' });
  });
});

// --- the README shows this file's code ---

describe('README "Testing your jobs"', () => {
  /** Lines that may differ: imports, and the module's database URI. */
  const comparable = (code: string) =>
    code
      .split('\n')
      .filter((line) => !/^import |^\/\/ \S+\.ts$|MongooseModule\.forRoot\(/.test(line))
      .join('\n')
      .trim();

  it('shows the code this file runs', () => {
    const readme = readFileSync('README.md', 'utf8');
    const section = readme.slice(
      readme.indexOf('## Testing your jobs'),
      readme.indexOf('\n## ', readme.indexOf('## Testing your jobs') + 1),
    );
    const blocks = [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => comparable(match[1]));
    expect(blocks).toHaveLength(3);
    const spec = comparable(readFileSync('test/e2e/testing-kit-readme.spec.ts', 'utf8'));
    for (const block of blocks) expect(spec).toContain(block);
  });
});
