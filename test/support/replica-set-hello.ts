import { type Document, deserialize, serialize } from 'bson';
import { buildOpMsg, EXACT, HEADER_BYTES, OP_MSG, OP_REPLY, parseOpMsg } from './wire-messages';

/** The legacy query opcode: the driver's first handshake on a connection is an OP_QUERY `isMaster`/`hello`. */
const OP_QUERY = 2004;
const HELLO_COMMANDS = ['hello', 'isMaster', 'ismaster'];
/** Where an OP_REPLY's first document starts: header, flags, cursor id, starting from, number returned. */
const OP_REPLY_DOCUMENT = HEADER_BYTES + 20;

/** Whether a client's message is a hello: an OP_MSG one, or the OP_QUERY of a connection's first handshake. */
export function isHelloRequest(message: Buffer): boolean {
  const opCode = message.readInt32LE(12);
  if (opCode === OP_MSG) return isHello(parseOpMsg(message).body);
  if (opCode !== OP_QUERY) return false;
  // flags, then the collection's name (a C string), number to skip, number to return, then the query.
  const at = message.indexOf(0, HEADER_BYTES + 4) + 1 + 8;
  const query = deserialize(message.subarray(at, at + message.readInt32LE(at)));
  return isHello((query.$query as Document | undefined) ?? query);
}

/**
 * A server's answer to a hello, rewritten as a replica-set primary's that takes sessions: what makes the driver send
 * retryable writes (a write that fails on the network is sent again after a new server selection), here to a server
 * that has no replica set. `address` is the one the client connected to (its only host).
 */
export function asReplicaSetPrimary(reply: Buffer, setName: string, address: string): Buffer {
  const primary = (body: Document): Document => ({
    ...body,
    ismaster: true,
    isWritablePrimary: true,
    secondary: false,
    setName,
    setVersion: 1,
    hosts: [address],
    me: address,
    logicalSessionTimeoutMinutes: 30,
  });
  const opCode = reply.readInt32LE(12);
  if (opCode === OP_MSG) {
    const { flags, body, rest } = parseOpMsg(reply);
    return buildOpMsg(reply, flags, primary(body), rest);
  }
  if (opCode !== OP_REPLY) return reply;
  const size = reply.readInt32LE(OP_REPLY_DOCUMENT);
  const body = deserialize(reply.subarray(OP_REPLY_DOCUMENT, OP_REPLY_DOCUMENT + size), EXACT);
  const rewritten = Buffer.concat([
    reply.subarray(0, OP_REPLY_DOCUMENT),
    Buffer.from(serialize(primary(body))),
    reply.subarray(OP_REPLY_DOCUMENT + size),
  ]);
  rewritten.writeInt32LE(rewritten.length, 0);
  return rewritten;
}

function isHello(command: Document): boolean {
  return HELLO_COMMANDS.some((name) => name in command);
}
