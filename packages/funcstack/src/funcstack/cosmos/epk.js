"use strict";
// Effective partition key (hash partitioning V2), as the Azure Cosmos SDKs compute it:
// MurmurHash3 x64 128 over the binary encoding of the partition key components,
// bytes reversed, top two bits cleared, upper-case hex. Used to place a document in its
// physical partition (ranges.js) and to scope requests by feed range (x-ms-start-epk /
// x-ms-end-epk, e.g. the feed range of one partition key).

const MASK = (1n << 64n) - 1n;
const C1 = 0x87c37b91114253d5n;
const C2 = 0x4cf5ad432745937fn;

const rotl = (v, s) => ((v << BigInt(s)) | (v >> BigInt(64 - s))) & MASK;
const mul = (a, b) => (a * b) & MASK;
const add = (a, b) => (a + b) & MASK;

function fmix(v) {
  let k = v;
  k ^= k >> 33n;
  k = mul(k, 0xff51afd7ed558ccdn);
  k ^= k >> 33n;
  k = mul(k, 0xc4ceb9fe1a85ec53n);
  k ^= k >> 33n;
  return k;
}

function readLE(buf, pos, n) {
  let v = 0n;
  for (let i = n - 1; i >= 0; i -= 1) v = (v << 8n) | BigInt(buf[pos + i]);
  return v;
}

function murmur3x64128(buf) {
  let h1 = 0n;
  let h2 = 0n;
  const len = buf.length;
  let pos = 0;
  while (pos + 16 <= len) {
    let k1 = readLE(buf, pos, 8);
    let k2 = readLE(buf, pos + 8, 8);
    k1 = mul(rotl(mul(k1, C1), 31), C2);
    h1 ^= k1;
    h1 = add(mul(add(rotl(h1, 27), h2), 5n), 0x52dce729n);
    k2 = mul(rotl(mul(k2, C2), 33), C1);
    h2 ^= k2;
    h2 = add(mul(add(rotl(h2, 31), h1), 5n), 0x38495ab5n);
    pos += 16;
  }
  const n = len & 15;
  let k1 = 0n;
  let k2 = 0n;
  for (let i = Math.min(n, 15); i >= 9; i -= 1) k2 ^= BigInt(buf[pos + i - 1]) << BigInt((i - 9) * 8);
  k2 = mul(rotl(mul(k2, C2), 33), C1);
  h2 ^= k2;
  for (let i = Math.min(n, 8); i >= 1; i -= 1) k1 ^= BigInt(buf[pos + i - 1]) << BigInt((i - 1) * 8);
  k1 = mul(rotl(mul(k1, C1), 31), C2);
  h1 ^= k1;
  h1 ^= BigInt(len);
  h2 ^= BigInt(len);
  h1 = add(h1, h2);
  h2 = add(h2, h1);
  h1 = fmix(h1);
  h2 = fmix(h2);
  h1 = add(h1, h2);
  h2 = add(h2, h1);
  return [h1, h2];
}

function encodeComponent(value) {
  if (value === true) return Buffer.from([0x03]);
  if (value === false) return Buffer.from([0x02]);
  if (value === null) return Buffer.from([0x01]);
  if (typeof value === "number") {
    const b = Buffer.alloc(9);
    b[0] = 0x05;
    b.writeDoubleLE(value, 1);
    return b;
  }
  if (typeof value === "string") {
    return Buffer.concat([Buffer.from([0x08]), Buffer.from(value, "utf8"), Buffer.from([0xff])]);
  }
  return Buffer.from([0x00]); // undefined: the document has no value there ({} on the wire)
}

/** EPK string of a list of partition key component values (hash V2). */
function effectivePartitionKeyV2(components) {
  const [low, high] = murmur3x64128(Buffer.concat(components.map(encodeComponent)));
  const bytes = Buffer.alloc(16);
  bytes.writeBigUInt64LE(low, 0);
  bytes.writeBigUInt64LE(high, 8);
  bytes.reverse();
  bytes[0] &= 0x3f;
  return bytes.toString("hex").toUpperCase();
}

// ---------------------------------------------------------------- hash V1 (version 1 containers)
// MurmurHash3 x86 32 over the components written for hashing (strings cut to 100 UTF-16 units,
// "\0"-terminated); the EPK is that hash, as a number, followed by the components, all in
// the orderable binary encoding, as upper-case hex (what the SDKs send for a V1 container).

function murmur3x8632(buf) {
  const c1 = 0xcc9e2d51;
  const c2 = 0x1b873593;
  let h = 0;
  const blocks = buf.length & ~3;
  const mixK = k => Math.imul((Math.imul(k, c1) << 15) | (Math.imul(k, c1) >>> 17), c2);
  for (let i = 0; i < blocks; i += 4) {
    h ^= mixK(buf.readInt32LE(i));
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  let k = 0;
  const rest = buf.length & 3;
  if (rest === 3) k ^= buf[blocks + 2] << 16;
  if (rest >= 2) k ^= buf[blocks + 1] << 8;
  if (rest >= 1) {
    k ^= buf[blocks];
    h ^= mixK(k);
  }
  h ^= buf.length;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * V1 cuts strings to 100 UTF-16 units, as the service and the .NET SDK do (`Substring(0, 100)`,
 * StringPartitionKeyComponent.Truncate); a cut inside a surrogate pair leaves a lone high
 * surrogate, which UTF-8 encodes as U+FFFD (EF BF BD) in Node as in .NET's Encoding.UTF8.
 * azure-cosmos 4.17 counts code points: past a character outside the basic plane among the
 * first 100 units, its V1 EPK of a string longer than 100 units is not the service's.
 */
function truncateV1(value) {
  if (typeof value === "string") return value.slice(0, 100);
  return value;
}

/**
 * What V1 hashes: strings "\0"-terminated, numbers as their double, as the service and the .NET
 * SDK hash them (-0 is not 0, -1 is not 2**32 - 1, 2**40 is not 0; azure-cosmos 4.17 hashes a
 * Python int by its low 32 bits, a float as its double).
 */
function hashInputV1(value) {
  if (typeof value === "string") {
    return Buffer.concat([Buffer.from([0x08]), Buffer.from(value, "utf8"), Buffer.from([0x00])]);
  }
  return encodeComponent(value);
}

/** A double as an order-preserving unsigned 64-bit number. */
function orderableBits(value) {
  const b = Buffer.alloc(8);
  b.writeDoubleLE(value);
  const bits = b.readBigUInt64LE();
  const sign = 1n << 63n;
  return bits < sign ? bits ^ sign : (MASK + 1n - bits) & MASK;
}

function binaryV1(value) {
  if (value === true) return [0x03];
  if (value === false) return [0x02];
  if (value === null) return [];
  if (typeof value === "number") {
    let payload = orderableBits(value);
    const out = [0x05, Number(payload >> 56n)];
    payload = (payload << 8n) & MASK;
    let byte = 0;
    let first = true;
    while (payload !== 0n) {
      if (!first) out.push(byte);
      first = false;
      byte = Number(payload >> 56n) | 0x01;
      payload = (payload << 7n) & MASK;
    }
    out.push(byte & 0xfe);
    return out;
  }
  if (typeof value === "string") {
    const utf8 = Buffer.from(value, "utf8");
    const short = utf8.length <= 100;
    const out = [0x08];
    for (let i = 0; i < (short ? utf8.length : 101); i += 1) out.push(utf8[i] + 1);
    if (short) out.push(0x00);
    return out;
  }
  return [0x00]; // undefined
}

/** EPK string of a list of partition key component values (hash V1). */
function effectivePartitionKeyV1(components) {
  const truncated = components.map(truncateV1);
  const hash = murmur3x8632(Buffer.concat(truncated.map(hashInputV1)));
  const bytes = [hash, ...truncated].flatMap(binaryV1);
  return Buffer.from(bytes).toString("hex").toUpperCase();
}

/**
 * The EPK prefix of a V1 hash value: every document whose hash is at least `hash` has an EPK
 * at or after it (the orderable number encoding keeps the order), so it cuts the V1 space.
 */
function v1HashBoundary(hash) {
  return Buffer.from(binaryV1(hash)).toString("hex").toUpperCase();
}

module.exports = { effectivePartitionKeyV1, effectivePartitionKeyV2, v1HashBoundary };
