import { type Document, deserialize, serialize } from 'bson';

/** Wire protocol opcodes and flags the test proxies read. */
export const OP_REPLY = 1;
export const OP_MSG = 2013;
export const HEADER_BYTES = 16;
export const CHECKSUM_PRESENT = 1;
export const MORE_TO_COME = 2;
/** Keep every value as the wire typed it (Int32, Long, Double…), so a re-encoded command means the same thing. */
export const EXACT = { promoteValues: false, promoteLongs: false, promoteBuffers: false, bsonRegExp: true } as const;

/** Splits a byte stream into whole wire messages (each starts with its int32 length). */
export function framer(onMessage: (message: Buffer) => void): (chunk: Buffer) => void {
  let pending: Buffer = Buffer.alloc(0);
  return (chunk) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 4 && pending.length >= pending.readInt32LE(0)) {
      const length = pending.readInt32LE(0);
      onMessage(pending.subarray(0, length));
      pending = pending.subarray(length);
    }
  };
}

export interface ParsedOpMsg {
  flags: number;
  body: Document;
  /** The sections after the body (document sequences), as bytes. */
  rest: Buffer;
}

/** The kind-0 body of an OP_MSG (the driver always sends it first), and what follows it. */
export function parseOpMsg(message: Buffer): ParsedOpMsg {
  const flags = message.readUInt32LE(HEADER_BYTES);
  const end = message.length - ((flags & CHECKSUM_PRESENT) !== 0 ? 4 : 0);
  const at = HEADER_BYTES + 4;
  if (message[at] !== 0) throw new Error('OP_MSG without a leading body section');
  const size = message.readInt32LE(at + 1);
  const body = deserialize(message.subarray(at + 1, at + 1 + size), EXACT);
  return { flags, body, rest: message.subarray(at + 1 + size, end) };
}

/**
 * The command an OP_MSG carries, as the server sees it: its body with each document sequence (kind-1 section, e.g.
 * `updates` of an `update`) added under its identifier. Values are promoted (plain numbers, Dates), for matching.
 */
export function commandOf(message: Buffer): Document {
  const { body, rest } = parseOpMsg(message);
  const command: Document = deserialize(serialize(body));
  for (let at = 0; at < rest.length; ) {
    if (rest[at] !== 1) break;
    const size = rest.readInt32LE(at + 1);
    const sectionEnd = at + 1 + size;
    const identifierEnd = rest.indexOf(0, at + 5);
    const identifier = rest.toString('utf8', at + 5, identifierEnd);
    const documents: Document[] = [];
    for (let doc = identifierEnd + 1; doc < sectionEnd; doc += rest.readInt32LE(doc)) {
      documents.push(deserialize(rest.subarray(doc, doc + rest.readInt32LE(doc))));
    }
    command[identifier] = documents;
    at = sectionEnd;
  }
  return command;
}

/** An OP_MSG with the same header ids, a new body and no checksum (it would no longer match). */
export function buildOpMsg(original: Buffer, flags: number, body: Document, rest: Buffer): Buffer {
  const encoded = Buffer.from(serialize(body));
  const header = Buffer.from(original.subarray(0, HEADER_BYTES + 4));
  header.writeUInt32LE(flags & ~CHECKSUM_PRESENT, HEADER_BYTES);
  const message = Buffer.concat([header, Buffer.from([0]), encoded, rest]);
  message.writeInt32LE(message.length, 0);
  return message;
}

/** `body` as the OP_MSG answer to `request`. */
export function replyTo(request: Buffer, body: Document): Buffer {
  const header = Buffer.alloc(HEADER_BYTES + 4);
  header.writeInt32LE(0, 4);
  header.writeInt32LE(request.readInt32LE(4), 8);
  header.writeInt32LE(OP_MSG, 12);
  return buildOpMsg(header, 0, body, Buffer.alloc(0));
}
