import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

/** Server error codes for injected error replies, by how the library is meant to treat them. */
export interface ServerErrorCodes {
  /** Codes the library retries ("not now"). */
  transient: number[];
  /** Codes the library treats as being about one document. */
  document: number[];
  /** Codes in neither list: real ones (11601 Interrupted, 11602…) and made-up ones. */
  unlisted: number[];
}

const SOURCE = resolve('lib/persistence/database-errors.ts');

/**
 * The lists as the library's source states them today (read from `lib/persistence/database-errors.ts`, which does not
 * export them), so the fault plans follow when the lists change. Fails loudly when a list can no longer be found.
 */
export function serverErrorCodes(): ServerErrorCodes {
  const source = readFileSync(SOURCE, 'utf8');
  const transient = codeList(source, 'TRANSIENT_CODES');
  const document = codeList(source, 'DOCUMENT_UPDATE_ERROR_CODES');
  const listed = new Set([...transient, ...document]);
  const unlisted = [11601, 8000, 43, 96, 175, 290, 99901, 424242].filter((code) => !listed.has(code));
  return { transient, document, unlisted };
}

function codeList(source: string, name: string): number[] {
  const match = new RegExp(`${name}\\s*=\\s*new Set\\(\\[([\\d,\\s]+)\\]\\)`).exec(source);
  if (!match) throw new Error(`server-error-codes: ${name} not found in ${SOURCE}`);
  return match[1]
    .split(',')
    .map((code) => Number(code.trim()))
    .filter((code) => Number.isInteger(code) && code > 0);
}
