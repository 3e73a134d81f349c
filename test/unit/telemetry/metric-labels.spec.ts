import { readdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import * as library from '../../../lib';
import { KNOWN_ERROR_TYPES } from '../../../lib/telemetry/known-error-types';
import { MetricLabels, OTHER_LABEL } from '../../../lib/telemetry/metric-labels';

describe('MetricLabels', () => {
  const handled = new Set(['email.send']);
  const labels = new MetricLabels((name) => handled.has(name), ['report.build']);

  it('keeps handled and listed job names, and folds every other into _other', () => {
    expect(labels.jobName('email.send')).toBe('email.send');
    expect(labels.jobName('report.build')).toBe('report.build');
    expect(labels.jobName('tenant.42.sync')).toBe(OTHER_LABEL);
    expect(labels.jobName(OTHER_LABEL)).toBe(OTHER_LABEL);
  });

  it('asks for handlers at every call: a handler registered after construction counts', () => {
    handled.add('late.handler');
    expect(labels.jobName('late.handler')).toBe('late.handler');
  });

  it('keeps built-in, library and NonError error types, and folds app-defined ones into _other', () => {
    for (const known of ['Error', 'TypeError', 'RangeError', 'NonError', 'LeaseLostError', 'JobTimeoutError']) {
      expect(labels.errorType(known)).toBe(known);
    }
    expect(labels.errorType('TenantQuotaExceededError')).toBe(OTHER_LABEL);
    expect(labels.errorType('x'.repeat(200))).toBe(OTHER_LABEL);
  });

  it('knows every error class the library defines (a new one must be added to KNOWN_ERROR_TYPES)', () => {
    const files = readdirSync(resolve('lib', 'model', 'errors')).filter((file) => file.endsWith('.error.ts'));
    const exported = Object.entries(library).filter(
      ([, value]) => typeof value === 'function' && value.prototype instanceof Error,
    );
    expect(exported.length).toBe(files.length);
    for (const [name] of exported) expect([name, KNOWN_ERROR_TYPES.has(name)]).toEqual([name, true]);
  });
});
