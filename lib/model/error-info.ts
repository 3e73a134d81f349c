/**
 * Storage bounds for what a handler threw, in UTF-8 bytes. Every attempt keeps its own copy (up to
 * MAX_ATTEMPT_HISTORY of them), so these bounds times the history must fit beside the largest payload.
 */
export const ERROR_MESSAGE_MAX_BYTES = 2048;
export const ERROR_STACK_MAX_BYTES = 4096;
export const ERROR_CLASS_MAX_BYTES = 200;

/** Causes followed into the stored stack. */
const MAX_CAUSES = 5;

/** What is stored of a thrown value: all bounded, all plain strings, whatever the value does when read. */
export interface ErrorInfo {
  message: string;
  errorClass: string;
  /** Stack, then the cause chain (`Caused by: …`); absent for non-Errors. */
  stack?: string;
}

/**
 * Message, class and stack of anything a handler threw, readable even for non-Errors (`throw 'x'`, `throw undefined`)
 * and for hostile values (throwing getters, proxies, huge strings, cyclic causes): this never throws, and a stored
 * error never grows the job past MongoDB's document limit. Text cut short ends with `… [truncated, N characters in all]`.
 */
export function errorInfo(thrown: unknown): ErrorInfo {
  if (!isError(thrown)) {
    return { message: truncate(nonErrorMessage(thrown), ERROR_MESSAGE_MAX_BYTES), errorClass: 'NonError' };
  }
  const message = readMessage(thrown);
  const errorClass = truncate(readClass(thrown), ERROR_CLASS_MAX_BYTES);
  const stack = readStackWithCauses(thrown);
  return {
    message: truncate(message || errorClass, ERROR_MESSAGE_MAX_BYTES),
    errorClass,
    ...(stack === undefined ? {} : { stack: truncateMiddle(stack, ERROR_STACK_MAX_BYTES) }),
  };
}

function isError(value: unknown): value is Error {
  try {
    return value instanceof Error;
  } catch {
    return false; // a Proxy whose getPrototypeOf trap throws
  }
}

function nonErrorMessage(thrown: unknown): string {
  if (thrown === undefined || thrown === null) return `Handler threw ${String(thrown)} instead of an Error`;
  if (typeof thrown === 'string') return thrown;
  return `Handler threw a non-Error: ${render(thrown)}`;
}

function readMessage(error: Error): string {
  try {
    const message: unknown = error.message;
    return typeof message === 'string' ? message : render(message);
  } catch (readError) {
    return `<unreadable message: ${safeText(readError)}>`;
  }
}

function readClass(error: Error): string {
  try {
    const name: unknown = error.name;
    if (typeof name === 'string' && name !== '') return name;
    const constructorName: unknown = error.constructor?.name;
    return typeof constructorName === 'string' && constructorName !== '' ? constructorName : 'Error';
  } catch {
    return 'Error';
  }
}

function readStack(error: Error): string | undefined {
  try {
    const stack: unknown = error.stack;
    return typeof stack === 'string' ? stack : undefined;
  } catch {
    return undefined;
  }
}

/** The error's stack followed by `Caused by:` sections, at most MAX_CAUSES deep and cycle-safe. */
function readStackWithCauses(error: Error): string | undefined {
  let text = readStack(error);
  const seen = new Set<unknown>([error]);
  let current: unknown = error;
  for (let depth = 0; depth < MAX_CAUSES; depth += 1) {
    let cause: unknown;
    try {
      cause = (current as { cause?: unknown }).cause;
    } catch {
      break;
    }
    if (cause === undefined || seen.has(cause)) break;
    seen.add(cause);
    // Each section is bounded first, so one huge cause cannot push the others out.
    const section = isError(cause)
      ? (readStack(cause) ?? `${readClass(cause)}: ${readMessage(cause)}`)
      : nonErrorMessage(cause);
    text = `${text ?? `${readClass(error)}: ${readMessage(error)}`}\nCaused by: ${truncateMiddle(section, ERROR_STACK_MAX_BYTES)}`;
    current = cause;
  }
  return text;
}

/** JSON when possible (bounded), else the `[object X]` tag; never throws. */
function render(value: unknown): string {
  try {
    const json = JSON.stringify(value);
    if (typeof json === 'string') return json;
  } catch {
    // toJSON threw, a getter threw, a cycle or a bigint: fall through to the tag
  }
  return safeText(value);
}

function safeText(value: unknown): string {
  try {
    return typeof value === 'object' && value !== null ? Object.prototype.toString.call(value) : String(value);
  } catch {
    return '<unprintable value>';
  }
}

function marker(text: string): string {
  return `… [truncated, ${text.length} characters in all]`;
}

/** `text` if it fits in `maxBytes` of UTF-8, else its start plus a marker, within `maxBytes` in all. */
export function truncate(text: string, maxBytes: number): string {
  if (fits(text, maxBytes)) return text;
  const suffix = marker(text);
  return cutToBytes(text, maxBytes - Buffer.byteLength(suffix)) + suffix;
}

/** Like `truncate`, but keeps the start and the end: a stack's header can be huge while its frames come last. */
export function truncateMiddle(text: string, maxBytes: number): string {
  if (fits(text, maxBytes)) return text;
  const middle = ` ${marker(text)} … `;
  const room = maxBytes - Buffer.byteLength(middle);
  const head = cutToBytes(text, Math.floor(room / 4));
  const tail = reverse(cutToBytes(reverse(text.slice(-room)), room - Buffer.byteLength(head)));
  return head + middle + tail;
}

function fits(text: string, maxBytes: number): boolean {
  // Three bytes per UTF-16 unit is the worst case, so short strings skip the byte count.
  return text.length * 3 <= maxBytes || Buffer.byteLength(text) <= maxBytes;
}

/** The longest prefix of `text` of at most `maxBytes` UTF-8 bytes, never splitting a character. */
function cutToBytes(text: string, maxBytes: number): string {
  // A prefix of maxBytes units holds at least maxBytes bytes, so a 9 MB string is never encoded whole.
  let cut = text.slice(0, maxBytes);
  while (Buffer.byteLength(cut) > maxBytes) {
    const over = Buffer.byteLength(cut) - maxBytes;
    cut = cut.slice(0, cut.length - Math.max(1, Math.floor(over / 3)));
  }
  // Never end on the first half of a surrogate pair.
  const last = cut.charCodeAt(cut.length - 1);
  return last >= 0xd800 && last <= 0xdbff ? cut.slice(0, -1) : cut;
}

function reverse(text: string): string {
  // Reverses by code unit, then restores surrogate pairs, so cutting the reversed string keeps characters whole.
  return [...text].reverse().join('');
}
