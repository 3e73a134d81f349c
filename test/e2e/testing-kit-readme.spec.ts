/**
 * The code of docs/testing.md ("Testing your jobs"), run as it is written there (its application is in
 * `test/support/readme-reports-app.ts`). Only the imports differ (`../../lib` for `nestjs-mongo-jobs`,
 * `../../lib/testing` for `nestjs-mongo-jobs/testing`) and the database URI comes from the test harness: the last test
 * fails when the page and this code drift apart.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { JobCancelledError, JobsService } from '../../lib';
import { createTestJobContext } from '../../lib/testing';
import { AppModule, ReportJobs, ReportStore } from '../support/readme-reports-app';

// --- docs/testing.md: "reports.spec.ts", a unit test of the handler (no MongoDB, no Nest) ---

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

// --- docs/testing.md: "reports.e2e-spec.ts", through HTTP and a real worker ---

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

// --- docs/testing.md shows this file's code ---

describe('docs/testing.md, "Testing your jobs"', () => {
  /** Lines that may differ: imports, and the module's database URI. */
  const comparable = (code: string) =>
    code
      .split('\n')
      .filter((line) => !/^import |^\/\/ \S+\.ts$|MongooseModule\.forRoot\(/.test(line))
      .join('\n')
      .trim();

  it('shows the code this file runs', () => {
    const page = readFileSync('docs/testing.md', 'utf8');
    expect(page.startsWith('# Testing your jobs\n')).toBe(true);
    const section = page.slice(0, page.indexOf('\n## Test setup\n'));
    // The example's three files (its Test setup blocks are run by scripts/check-consumers.mjs instead).
    const blocks = [...section.matchAll(/```ts\n(\/\/ \S*reports[.\w-]*\.ts\n[\s\S]*?)```/g)].map((match) =>
      comparable(match[1]),
    );
    expect(blocks).toHaveLength(3);
    const spec = comparable(
      ['test/support/readme-reports-app.ts', 'test/e2e/testing-kit-readme.spec.ts']
        .map((file) => readFileSync(file, 'utf8'))
        .join('\n'),
    );
    for (const block of blocks) expect(spec).toContain(block);
  });
});
