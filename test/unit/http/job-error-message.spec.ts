import { describe, expect, it } from '@jest/globals';
import { jobErrorMessage } from '../../../lib/http/job-error-message';
import { DrainTimeoutError } from '../../../lib/model/errors/drain-timeout.error';

describe('jobErrorMessage of a DrainTimeoutError', () => {
  const left = [
    { name: 'tenant.acme-corp.sync', status: 'pending' as const, count: 2, jobId: '0123456789abcdef01234567' },
    {
      name: 'billing.charge',
      status: 'running' as const,
      count: 1,
      jobId: '89abcdef0123456701234567',
      expiredLeases: 1,
    },
  ];

  it('says that jobs were left and after how long, not which names or ids', () => {
    const error = new DrainTimeoutError(left, 250);
    // The error itself keeps the details for the application's logs.
    expect(error.message).toContain('tenant.acme-corp.sync');
    const message = jobErrorMessage(error);
    expect(message).toBe('Jobs were still left after 250 ms (drain); they may still finish later.');
    expect(message).not.toMatch(/acme|billing|0123456789abcdef|89abcdef|lease/);
  });

  it('says that nothing could be confirmed when no read found anything, without the cause', () => {
    const error = new DrainTimeoutError([], 250, { cause: new Error('connection to db-7.internal:27017 closed') });
    expect(jobErrorMessage(error)).toBe('Could not confirm within 250 ms that no job was left (drain).');
  });
});
