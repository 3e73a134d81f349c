/**
 * Bytes in a payload come back as bytes. BSON has one binary type and the driver reads it back as a `Binary`,
 * which is neither a Buffer nor accepted by `enqueue` again; this turns the generic subtype, which is what the
 * driver writes for a Buffer or Uint8Array, back into a `Buffer` (itself a Uint8Array). Only subtype 0 is used:
 * other subtypes are not kept by every server we support, so a Uint8Array cannot be told from a Buffer once stored.
 */
const GENERIC_BINARY_SUBTYPE = 0;

/**
 * A stored payload as handed to users. Changes the (freshly read) value in place and returns it; a payload without
 * bytes is walked once and nothing is allocated. Binary values of other subtypes (UUID, …), which only a raw write
 * could have stored, are left as the driver gives them.
 */
export function decodePayload<T>(payload: T): T {
  return decodeValue(payload) as T;
}

function decodeValue(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if ((value as { _bsontype?: unknown })._bsontype === 'Binary') return decodeBinary(value as StoredBinary);
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index += 1) {
      const child = value[index];
      if (typeof child === 'object' && child !== null) value[index] = decodeValue(child);
    }
    return value;
  }
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return value; // Date, ObjectId, …
  const record = value as Record<string, unknown>;
  for (const key in record) {
    const child = record[key];
    if (typeof child === 'object' && child !== null) {
      const decoded = decodeValue(child);
      if (decoded !== child) record[key] = decoded;
    }
  }
  return value;
}

/** The parts of bson's `Binary` we read (duck-typed: the app and the driver may load different bson copies). */
interface StoredBinary {
  sub_type: number;
  position: number;
  buffer: Uint8Array;
}

function decodeBinary(binary: StoredBinary): unknown {
  if (binary.sub_type !== GENERIC_BINARY_SUBTYPE) return binary;
  // Copied: the driver's bytes may be a view into a larger buffer that should not be kept alive.
  return Buffer.from(binary.buffer.subarray(0, binary.position));
}
