import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { LIBRARY_VERSION } from '../../../lib/model/version';

describe('LIBRARY_VERSION', () => {
  it("is package.json's version (regenerate with `node scripts/write-version.mjs`; `npm version` does)", () => {
    const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    expect(LIBRARY_VERSION).toBe(version);
  });
});
