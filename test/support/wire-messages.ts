import { type Document, deserialize, serialize } from 'bson';

/**
 * MongoDB wire-protocol framing shared by the test proxies: split a byte stream into messages, read and rebuild an
 * OP_MSG, answer a request with a body of our own. The opcodes and flags below are the ones the proxies read.
 */
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
export function parseOpMsg(message: Buffer, options: Parameters<typeof deserialize>[1] = EXACT): ParsedOpMsg {
  const flags = message.readUInt32LE(HEADER_BYTES);
  const end = message.length - ((flags & CHECKSUM_PRESENT) !== 0 ? 4 : 0);
  const at = HEADER_BYTES + 4;
  if (message[at] !== 0) throw new Error('OP_MSG without a leading body section');
  const size = message.readInt32LE(at + 1);
  const body = deserialize(message.subarray(at + 1, at + 1 + size), options);
  return { flags, body, rest: message.subarray(at + 1 + size, end) };
}

/**
 * The command an OP_MSG carries, as the server sees it: its body with each document sequence (kind-1 section, e.g.
 * `updates` of an `update`) added under its identifier. Values are promoted (plain numbers, Dates), for matching.
 */
export function commandOf(message: Buffer): Document {
  const { body, rest } = parseOpMsg(message);
  const command: Document = deserialize(serialize(body));
  for (const [identifier, documents] of parseSequences(rest)) command[identifier] = documents;
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

/** The request id a reply answers. */
export function responseTo(message: Buffer): number {
  return message.readInt32LE(8);
}

/** A message's own request id. */
export function requestId(message: Buffer): number {
  return message.readInt32LE(4);
}

/** The document sequences (kind-1 sections) after an OP_MSG body, by identifier (`documents`, `updates`…). */
export function parseSequences(rest: Buffer): Map<string, Document[]> {
  const sequences = new Map<string, Document[]>();
  let at = 0;
  while (at < rest.length) {
    if (rest[at] !== 1) throw new Error(`OP_MSG section of unknown kind ${rest[at]}`);
    const size = rest.readInt32LE(at + 1);
    const end = at + 1 + size;
    const nameEnd = rest.indexOf(0, at + 5);
    const identifier = rest.toString('utf8', at + 5, nameEnd);
    const documents: Document[] = [];
    for (let doc = nameEnd + 1; doc < end; doc += rest.readInt32LE(doc)) {
      documents.push(deserialize(rest.subarray(doc, doc + rest.readInt32LE(doc))));
    }
    sequences.set(identifier, documents);
    at = end;
  }
  return sequences;
}
