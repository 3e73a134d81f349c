import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { JobHandler } from '../../lib';
import { createJobsTestApp, type JobsTestApp, waitFor } from '../support/jobs-app';
import { uniqueDatabaseName } from '../support/test-database';

const NINE_MB = 9 * 1024 * 1024;

@Injectable()
class HugeErrorHandlers {
  @JobHandler('huge-message', { maxAttempts: 1 })
  hugeMessage() {
    throw new Error(`real failure ${'x'.repeat(NINE_MB)}`);
  }
}

describe('errors are stored bounded', () => {
  let app: JobsTestApp;

  beforeAll(async () => {
    app = await createJobsTestApp({
      dbName: uniqueDatabaseName('error_storage'),
      options: { pollIntervalMs: 20, leaseMs: 1000 },
      providers: [HugeErrorHandlers],
    });
  });
  afterAll(() => app.close());

  it('records a handler’s 9 MB error message as an ordinary, truncated failed attempt', async () => {
    const job = await app.jobs.enqueue('huge-message');
    await waitFor(async () => (await app.jobs.findById(job.id))?.status === 'dead', 'huge-message dead');
    const record = await app.jobs.findById(job.id);
    expect(record?.attempts).toHaveLength(1);
    const [attempt] = record?.attempts ?? [];
    expect(attempt.errorClass).toBe('Error');
    expect(attempt.error).toMatch(/^real failure x+… \[truncated, \d+ characters in all\]$/);
    expect(attempt.error.length).toBeLessThan(5000);
    expect(attempt.stack).toContain('hugeMessage');
    expect(record?.lastError).toBe(attempt.error);
  });
});
