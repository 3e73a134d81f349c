import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from '@jest/globals';

/** A source file longer than this holds more than one concept: split it (one concept per file). */
const MAX_SOURCE_LINES = 400;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.c?ts$/.test(entry.name) ? [path] : [];
  });
}

describe('source file sizes', () => {
  it(`no file under lib/ is over ${MAX_SOURCE_LINES} lines`, () => {
    const files = sourceFiles('lib');
    expect(files.length).toBeGreaterThan(100);
    const long = files
      .map((file) => ({ file: relative('.', file), lines: readFileSync(file, 'utf8').split('\n').length - 1 }))
      .filter(({ lines }) => lines > MAX_SOURCE_LINES);
    expect(long).toEqual([]);
  });
});
