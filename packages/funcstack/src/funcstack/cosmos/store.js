"use strict";
/*
 * The document store of the local Cosmos DB endpoint (server.js): every read and write of a
 * container's documents goes through `Store`, over the package's (@vercel/cosmosdb-server
 * 1.0.1) collection, which keys documents by id and the first partition key value.
 *
 *   - partition key components of a document (missing values are "undefined", `{}` on the
 *     wire, as the service hashes them), the store key;
 *   - stamps: each written version carries its LSN (its range's: lsn.js) and its
 *     modification time (non-enumerable `__lsn` / `__mtime`, never sent) and a quoted etag,
 *     as the service's etags are;
 *   - where a document lies: its effective partition key (EPK, epk.js: hash V1 for a
 *     container created with partitionKey.version 1, V2 otherwise) and the range (physical
 *     partition, ranges.js) holding it;
 *   - TTL as the service applies it: the container's defaultTtl (absent: off) overridden by
 *     the item's ttl (-1: never); an expired document is deleted when it is accessed;
 *   - `resolveStore`: a document operation on a missing database or container answers 404
 *     with sub-status 1003, as the service does;
 *   - every version written, put back or removed is reported: to the container's indexes
 *     (indexes.js: the LSN index of its range the change feed reads, the expiry index the TTL
 *     sweep pops; pathindexes.js: the range indexes queries read, given the version replaced
 *     too), to the all-versions log while one is kept (allversions.js: each create, replace
 *     and delete with its metadata, a TTL expiry as a delete) and to the one observer
 *     `observe` registers (persistence.js's journal, which writes it before the answer);
 *   - a document is kept as its JSON text (`StoredDocument`: the body the service answers,
 *     Latin-1 text as one string, anything else as its UTF-8 bytes), with what the rooms need to
 *     find, scope and expire it without parsing it, and parsed into a new object when read: a
 *     stored document costs about its size in memory, where the objects JSON.parse makes of
 *     ~1 KB cost about twice that (docs/cosmos.md, "Memory").
 */

const { Write } = require("./lsn");
const { patchOperation, getValue } = require("./internals");
const { CosmosError, ownerNotFound } = require("./responses");
const { indexOf } = require("./indexes");
const { existingPathIndexes } = require("./pathindexes");
const { effectivePartitionKeyV1, effectivePartitionKeyV2 } = require("./epk");
const { liveRanges, rangeOfEpk } = require("./ranges");
const allVersions = require("./allversions");

function getPath(obj, pathSegments) {
  let cur = obj;
  for (const seg of pathSegments) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = cur[seg];
  }
  return cur;
}

function pkPaths(colData) {
  const paths = ((colData && colData.partitionKey) || {}).paths || [];
  return paths.map(p => p.slice(1).split("/"));
}

/** Partition key component values of a document (undefined when missing). */
function docPartitionComponents(colData, doc) {
  const paths = pkPaths(colData);
  if (paths.length === 0) return [doc.id];
  return paths.map(p => getPath(doc, p));
}

function sameComponents(a, b) {
  return JSON.stringify(a.map(v => (v === undefined ? {} : v))) ===
    JSON.stringify(b.map(v => (v === undefined ? {} : v)));
}

/** The vercel store keys documents by the first partition key value (undefined for `{}`). */
function storeKey(components) {
  if (!components || components.length === 0) return undefined;
  const v = components[0];
  if (v && typeof v === "object") return undefined; // [{}] = undefined / none
  return v;
}

function sameStoreKey(a, b) {
  return JSON.stringify(a === undefined ? null : a) === JSON.stringify(b === undefined ? null : b);
}

/**
 * The EPKs of the partition keys hashed last, by hash version and key's JSON (EPKS_KEPT at
 * most, the oldest dropped first): a request names its partition key in a header, and the
 * hash (MurmurHash3 over BigInts, epk.js) cost a few microseconds of each point operation on
 * it. A key holding -0 is not kept (its JSON is 0's, its EPK is not).
 */
const epks = new Map();
const EPKS_KEPT = 4096;

/** The EPK of a partition key (its components), with the container's hash version. */
function keyEpk(colData, components) {
  const comps = components.map(v => (v === undefined ? {} : v));
  // a container created with partitionKey.version 1 hashes its keys with V1
  const v1 = (colData.partitionKey || {}).version === 1;
  const hash = () => (v1 ? effectivePartitionKeyV1(comps) : effectivePartitionKeyV2(comps));
  if (comps.some(v => Object.is(v, -0))) return hash();
  const key = `${v1 ? 1 : 2}${JSON.stringify(comps)}`;
  let epk = epks.get(key);
  if (epk === undefined) {
    epk = hash();
    if (epks.size >= EPKS_KEPT) epks.delete(epks.keys().next().value);
    epks.set(key, epk);
  }
  return epk;
}

/**
 * A stored document's EPK, kept on it (StoredDocument) once computed: a version's partition
 * key never changes, nor its container's hash version.
 */
function itemEpk(colData, item) {
  if (item.epk === null) item.epk = keyEpk(colData, item.components());
  return item.epk;
}

/** A document's EPK (an object read from the store: its stored version keeps it). */
function docEpk(colData, doc) {
  if (doc.__stored) return itemEpk(colData, doc.__stored);
  const components = docPartitionComponents(colData, doc);
  const key = `${(colData.partitionKey || {}).version === 1 ? 1 : 2}${JSON.stringify(components)}`;
  const cached = doc.__epk;
  if (cached && cached.key === key) return cached.epk;
  const epk = keyEpk(colData, components);
  Object.defineProperty(doc, "__epk", { value: { key, epk }, enumerable: false, configurable: true, writable: true });
  return epk;
}

/** The id of the live range holding a document (a parsed version); one range needs no EPK. */
function rangeIdOf(collection, doc) {
  const ranges = liveRanges(collection);
  if (ranges.length === 1) return ranges[0].id;
  return rangeOfEpk(collection, docEpk(collection.read(), doc)).id;
}

/** The same for an item of the package's documents (a StoredDocument, told without parsing it). */
function itemRangeId(collection, item) {
  const ranges = liveRanges(collection);
  if (ranges.length === 1) return ranges[0].id;
  if (!(item instanceof StoredDocument)) return rangeIdOf(collection, item.read());
  return rangeOfEpk(collection, itemEpk(collection.read(), item)).id;
}

/** Stamp a version as written at `lsn`, at `at` (ms: a batch's documents share their _ts). */
function stamp(doc, lsn, at) {
  Object.defineProperty(doc, "__lsn", { value: lsn, enumerable: false, configurable: true, writable: true });
  Object.defineProperty(doc, "__mtime", { value: at, enumerable: false, configurable: true, writable: true });
  doc._ts = Math.floor(at / 1000);
  // real Cosmos etags are quoted strings
  if (!String(doc._etag).startsWith('"')) doc._etag = `"${doc._etag}"`;
  return doc;
}

function lsnOf(doc) {
  return doc.__lsn || 0;
}

/** Effective TTL in seconds (>0) of a document, or null when it never expires. */
function effectiveTtl(colData, doc) {
  return ttlOf(colData, doc.ttl);
}

/** Effective TTL in seconds (>0) for a document's own `ttl` value, or null. */
function ttlOf(colData, own) {
  const def = colData.defaultTtl;
  if (def === undefined || def === null) return null; // TTL off on the container
  let ttl = def;
  if (typeof own === "number" && Number.isFinite(own)) ttl = own;
  if (ttl === -1 || ttl <= 0) return null;
  return ttl;
}

function isExpired(colData, doc, now) {
  const ttl = effectiveTtl(colData, doc);
  if (ttl === null) return false;
  const mtime = doc.__mtime || doc._ts * 1000;
  return now >= mtime + ttl * 1000;
}

/**
 * Whether the version an item of the package's documents holds has expired by `now`, read
 * without parsing a stored document (its own ttl and time are kept beside its text).
 */
function itemExpired(colData, item, now) {
  if (colData.defaultTtl === undefined || colData.defaultTtl === null) return false;
  if (item instanceof StoredDocument) {
    const ttl = ttlOf(colData, item.ttl);
    return ttl !== null && now >= item.mtime + ttl * 1000;
  }
  const doc = item.read();
  return !doc || isExpired(colData, doc, now);
}

/** Put a stored version's LSN and modification time back (a restored snapshot). */
function stampAs(doc, lsn, mtime) {
  Object.defineProperty(doc, "__lsn", { value: lsn, enumerable: false, configurable: true, writable: true });
  Object.defineProperty(doc, "__mtime", { value: mtime, enumerable: false, configurable: true, writable: true });
  return doc;
}

/** When a version expires (ms since the epoch), or null when it never does. */
function expiresAt(colData, doc) {
  const ttl = effectiveTtl(colData, doc);
  if (ttl === null) return null;
  return (doc.__mtime || doc._ts * 1000) + ttl * 1000;
}

/** A character outside Latin-1: V8 then keeps the whole string at two bytes per character. */
const WIDE = /[^\u0000-\u00ff]/;

/**
 * A document's JSON in the form that costs the least memory: the string itself where V8 keeps
 * it at one byte a character (Latin-1 text, which JSON of ASCII text is), else its UTF-8 bytes
 * (a document with an emoji or a curly quote in it, which V8 would keep at two bytes a
 * character; CJK text costs three bytes a character either way in its JSON).
 */
function compactJson(text) {
  if (Buffer.byteLength(text, "utf8") === text.length || !WIDE.test(text)) return text;
  return Buffer.from(text, "utf8");
}

/** The same, from UTF-8 bytes (a snapshot's line): buf[start..end). */
function compactJsonOf(buf, start, end) {
  const text = buf.toString("utf8", start, end);
  if (text.length === end - start || !WIDE.test(text)) return text;
  const copy = Buffer.allocUnsafe(end - start); // pooled when small; not a view of the chunk read
  buf.copy(copy, 0, start, end);
  return copy;
}

/**
 * A document as the endpoint keeps it, in the place of the package's Document item (its
 * `read()`): its JSON text, the version's stamps (LSN, modification time), and what the rooms
 * need to find, scope and expire it without parsing it: its own ttl, id, the first component
 * of its partition key (`key`; `parts` holds all of them where there are several, a
 * hierarchical key), the values of the container's other unique key paths (or null) and its
 * EPK once computed (partitions.js). `read()` parses a new object every time, stamped as the
 * version it is: callers may change what they get. A write replaces the item (store.js
 * `written`), so none of this ever changes.
 */
class StoredDocument {
  constructor(rid, json, lsn, mtime, ttl, id, key, parts, unique) {
    this.rid = rid;
    this.json = json; // a string of Latin-1 text, or UTF-8 bytes (compactJson)
    this.lsn = lsn;
    this.mtime = mtime;
    this.ttl = ttl; // the document's own ttl, or null
    this.id = id;
    this.key = key; // its partition key's first component (undefined: none)
    this.parts = parts; // every component of a hierarchical key, else null
    this.unique = unique; // values of the container's unique key paths other than /id, or null
    this.epk = null; // its EPK, once a request scoped by ranges needed it
  }

  /** The stored JSON. */
  text() {
    return typeof this.json === "string" ? this.json : this.json.toString("utf8");
  }

  /** The partition key's components (as docPartitionComponents gives them). */
  components() {
    return this.parts || [this.key];
  }

  read() {
    const doc = stampAs(JSON.parse(this.text()), this.lsn, this.mtime);
    Object.defineProperty(doc, "__stored", { value: this, enumerable: false, configurable: true, writable: true });
    return doc;
  }
}

/**
 * The StoredDocument of a version (`doc`, stamped) of a container's document: its JSON as
 * it is answered, and what docPartitionComponents and the package's unique keys read of it.
 */
function storedOf(docs, colData, doc) {
  const components = docPartitionComponents(colData, doc);
  const paths = docs._uniqueKeyPaths;
  const unique = paths.length > 1 ? paths.slice(0, -1).map(p => getValue(p.slice(1).split("/"), doc)) : null;
  return new StoredDocument(doc._rid, compactJson(JSON.stringify(doc)), lsnOf(doc), doc.__mtime || 0,
    typeof doc.ttl === "number" ? doc.ttl : null, doc.id, components[0],
    components.length > 1 ? components : null, unique);
}

/** Keep every document of a container that is not yet a StoredDocument as one (after a load). */
function keepAsText(collection) {
  const docs = collection.documents;
  const colData = collection.read();
  for (const [rid, item] of docs._data) {
    if (item instanceof StoredDocument) continue;
    const doc = item.read();
    if (doc) docs._data.set(rid, storedOf(docs, colData, doc));
  }
}

/**
 * The value the package keys a document by (its `_getPartition`): the value at the first
 * partition key path, or the id where the package falls back to it (no path, `/_partitionKey`).
 */
function packageKeyOf(docs, item) {
  const path = docs._getPartitionKeyPath();
  return path.length === 1 && path[0] === "id" ? item.id : item.key;
}

/**
 * The partition index key (indexes.js) of a partition key's first component: the value itself
 * (a Map tells "1" from 1 and null from undefined), undefined for none; every object value one
 * key (a partition key value is a string, number, boolean or null). Documents under one key may
 * still differ in the other components (hierarchical keys: the caller compares them).
 */
function partitionKeyOf(first) {
  if (first === null || typeof first !== "object") return first;
  return Array.isArray(first) || Object.keys(first).length > 0 ? OBJECT_KEY : undefined;
}

const OBJECT_KEY = Symbol("an object");

function docPartitionKey(colData, doc) {
  return partitionKeyOf(docPartitionComponents(colData, doc)[0]);
}

/** The LSN of the version an item of the package's documents holds (never parses a stored one). */
function itemLsn(item) {
  return item instanceof StoredDocument ? item.lsn : lsnOf(item.read());
}

/** The indexes (indexes.js) of a container: the package's collection object. */
function indexes(collection) {
  const colData = collection.read();
  return indexOf(collection, {
    lsn: itemLsn,
    range: item => itemRangeId(collection, item),
    partition: item => (item instanceof StoredDocument
      ? partitionKeyOf(item.key)
      : docPartitionKey(colData, item.read())),
    expiresAt: item => {
      if (!(item instanceof StoredDocument)) return expiresAt(colData, item.read());
      const ttl = ttlOf(colData, item.ttl);
      return ttl === null ? null : item.mtime + ttl * 1000;
    }
  });
}

let observer = null;

/**
 * Register the one observer of document changes: `fn(collection, rid)` after a version of the
 * document `rid` is written, put back or removed (persistence.js's journal). null: none.
 */
function observe(fn) {
  observer = fn;
}

/**
 * A version `doc` was written over `previous` (the version it replaced, or null for a document
 * that was not there): from now on the container keeps it as its JSON text.
 */
function written(collection, doc, previous = null) {
  const colData = collection.read();
  const docs = collection.documents;
  const stored = storedOf(docs, colData, doc);
  if (doc.__epk) stored.epk = doc.__epk.epk; // placed by its EPK already (stamped): not again
  docs._data.set(doc._rid, stored); // the same place in the map
  indexes(collection).written(lsnOf(doc), doc._rid, expiresAt(colData, doc), docPartitionKey(colData, doc),
    itemRangeId(collection, stored));
  const paths = existingPathIndexes(collection);
  if (paths) paths.written(doc, previous);
  if (observer) observer(collection, doc._rid);
  return doc;
}

function removed(collection, doc) {
  indexes(collection).removed(docPartitionKey(collection.read(), doc), doc._rid);
  const paths = existingPathIndexes(collection);
  if (paths) paths.removed(doc);
  if (observer) observer(collection, doc._rid);
}

/**
 * A created or replaced version `doc` (over `previous`, or null) of the write `write`, in the
 * container's all-versions log when one is kept (allversions.js).
 */
function loggedVersion(collection, write, doc, previous) {
  if (!allVersions.keeping(collection)) return;
  const colData = collection.read();
  const item = collection.documents._data.get(doc._rid);
  allVersions.record(collection, write, itemRangeId(collection, item), allVersions.versionEntry(
    lsnOf(doc), Math.floor(write.time() / 1000), itemEpk(colData, item), item.components(), item.json,
    previous ? lsnOf(previous) : null));
}

/** The delete of `doc` by the write `write` (at `lsn` in the range `rangeId`), likewise. */
function loggedDelete(collection, write, rangeId, lsn, doc) {
  if (!allVersions.keeping(collection)) return;
  const colData = collection.read();
  allVersions.record(collection, write, rangeId, allVersions.deleteEntry(
    lsn, Math.floor(write.time() / 1000), docEpk(colData, doc), docPartitionComponents(colData, doc), doc.id,
    colData, lsnOf(doc), write.ttlExpired));
}

/** The package's write, its unique key violation answered 409 as the service answers it. */
function uniqueKeysKept(write) {
  try {
    return write();
  } catch (err) {
    if (err && err.conflict) throw new CosmosError(409, "Conflict", err.message);
    throw err;
  }
}

class Store {
  /** `names`: {database, container}, the ids a request named them by (resolveStore), or null. */
  constructor(collection, names = null) {
    this.collection = collection;
    this.docs = collection.documents;
    this.names = names;
  }

  get colData() {
    return this.collection.read();
  }

  /** Live document by id + store key; expired documents are deleted on access. */
  get(id, key) {
    const item = this.collection.document(id, key === undefined || key === null || key === "" ? id : key);
    if (item instanceof StoredDocument) { // told from what is kept beside its text, then parsed
      if (key !== undefined && !sameStoreKey(storeKey(item.components()), key)) return null;
      if (itemExpired(this.colData, item, Date.now())) {
        this.expire(item.read());
        return null;
      }
      return item.read();
    }
    const doc = item.read();
    if (!doc) return null;
    if (key !== undefined && doc && !sameStoreKey(storeKey(docPartitionComponents(this.colData, doc)), key)) {
      return null;
    }
    if (isExpired(this.colData, doc, Date.now())) {
      this.expire(doc);
      return null;
    }
    return doc;
  }

  /**
   * Remove a document: a delete of the write `write` (its LSN in the document's range; the
   * all-versions log records it), or, without one, a version taken back (a batch rolled back).
   */
  remove(doc, write = null) {
    const key = storeKey(docPartitionComponents(this.colData, doc));
    this.docs.delete(doc.id, key === undefined || key === null || key === "" ? doc.id : key);
    removed(this.collection, doc);
    if (write) {
      const rangeId = rangeIdOf(this.collection, doc);
      loggedDelete(this.collection, write, rangeId, write.lsnIn(rangeId), doc);
    }
  }

  /** Delete a document whose time to live has passed: a write of its own, as the service's. */
  expire(doc) {
    this.remove(doc, new Write(this.collection, { ttlExpired: true }));
  }

  /** A version stamped for the write `write` in the range its key lands in. */
  stamped(doc, write) {
    const rangeId = rangeIdOf(this.collection, doc);
    return stamp(doc, write.lsnIn(rangeId), write.time());
  }

  /**
   * The live documents of the partition key `pk` (its components; those of a hierarchical key
   * sharing the first component too: the caller compares the rest), from the partition index;
   * expired ones are deleted on the way.
   */
  inPartition(pk) {
    const now = Date.now();
    const colData = this.colData;
    const out = [];
    const expired = [];
    for (const rid of indexes(this.collection).inPartition(partitionKeyOf(pk[0]))) {
      const item = this.docs._data.get(rid);
      const doc = item && item.read();
      if (!doc) continue;
      if (isExpired(colData, doc, now)) expired.push(doc);
      else out.push(doc);
    }
    expired.forEach(d => this.expire(d));
    return out;
  }

  /**
   * The _rids under a partition key's first component in the partition index (documents of a
   * hierarchical key that share it too, expired ones too: the caller checks them).
   */
  partitionRids(pk) {
    return indexes(this.collection).inPartition(partitionKeyOf(pk[0]));
  }

  /** Create a document: a write of `write` (a Write of its own when not given one). */
  insert(body, write) {
    const w = ownWrite(this.collection, write);
    const doc = written(this.collection, this.stamped(uniqueKeysKept(() => this.docs.create(body)), w));
    loggedVersion(this.collection, w, doc, null);
    return doc;
  }

  /** Replace the version `old` of a document by `body`, as the write `write`. */
  overwrite(body, old, write) {
    const w = ownWrite(this.collection, write);
    const doc = written(this.collection, this.stamped(uniqueKeysKept(() => this.docs.replace(body, old)), w), old);
    loggedVersion(this.collection, w, doc, old);
    return doc;
  }

  /** Put a previous version (or absence) back: used to roll back a failed batch. */
  restore(id, key, previous) {
    const current = this.collection.document(id, key === undefined || key === null || key === "" ? id : key).read();
    if (current) this.remove(current);
    if (previous) {
      this.docs._set(previous);
      written(this.collection, previous);
    }
  }

  /**
   * The live documents written in the range `rangeId` after `sinceLsn`, in LSN order (the
   * change feed): read from the range's LSN index, so the cost is what was written since, not
   * the container's size.
   */
  *changedSince(rangeId, sinceLsn) {
    const colData = this.colData;
    const now = Date.now();
    for (const item of indexes(this.collection).changedSince(rangeId, sinceLsn)) {
      if (!itemExpired(colData, item, now)) yield item.read();
    }
  }

  /**
   * Delete what has expired by `now`, at most `max` documents (the TTL sweep): popped from the
   * expiry index, so the cost is what expires, not the container's size. Returns how many.
   */
  deleteExpired(now, max) {
    const index = indexes(this.collection);
    const colData = this.colData;
    let deleted = 0;
    while (deleted < max && index.expiry.peek() <= now) {
      const [, rid, lsn] = index.expiry.pop();
      const item = index.live(rid, lsn);
      if (item && itemExpired(colData, item, now)) {
        this.expire(item.read());
        deleted += 1;
      }
    }
    return deleted;
  }

  /**
   * How many live documents the container holds, from what it keeps (the package's map of
   * them, the expiry index): those whose time to live has passed and that the sweep has not
   * deleted yet are not counted, as the service answers no expired item. The cost is what has
   * expired and waits for the sweep, not what the container holds.
   */
  count(now) {
    const colData = this.colData;
    const held = this.docs._data.size;
    if (colData.defaultTtl === undefined || colData.defaultTtl === null) return held;
    return held - indexes(this.collection).expiredBy(now, item => itemExpired(colData, item, now));
  }

  /** A document by its _rid (as stored: not checked for expiry), or null. */
  byRid(rid) {
    const item = this.docs._data.get(rid);
    return (item && item.read()) || null;
  }

  /**
   * The package's patch of one document: {statusCode, body} as its handler answers; the
   * patched version (`doc`, on success) is a write of `write`.
   */
  applyPatch(id, key, operations, write) {
    const old = this.collection.document(id, key === undefined || key === null || key === "" ? id : key).read();
    const result = patchOperation(this.collection, {
      id,
      partitionKey: JSON.stringify([key === undefined ? {} : key]),
      operations
    });
    if (result.statusCode < 400) {
      const w = ownWrite(this.collection, write);
      const doc = this.collection.document(id, key === undefined || key === null || key === "" ? id : key).read();
      result.doc = written(this.collection, this.stamped(doc, w), old);
      loggedVersion(this.collection, w, result.doc, old);
    }
    return result;
  }

  /** The container's user-defined functions, for the engine's options. */
  udfs() {
    return this.docs._userDefinedFunctions();
  }
}

/** `write` when it is a Write (lsn.js), else a Write of its own to `collection`. */
function ownWrite(collection, write) {
  return write instanceof Write ? write : new Write(collection);
}

/** Every container of every database of the account (the package's collection objects). */
/** Every container of the account (of the database of id `database`, when given). */
function* collections(account, database = null) {
  for (const dbItem of account.databases._data.values()) {
    const dbData = dbItem.read();
    if (!dbData || (database !== null && dbData.id !== database)) continue;
    yield* dbItem.collections._data.values();
  }
}

function resolveStore(account, dbId, collId) {
  const database = account.database(dbId);
  if (!database.read()) throw ownerNotFound();
  const collection = database.collection(collId);
  const colData = collection.read();
  if (!colData) throw ownerNotFound();
  return new Store(collection, { database: database.read().id, container: colData.id });
}

module.exports = {
  Store,
  StoredDocument,
  storedOf,
  keepAsText,
  compactJsonOf,
  packageKeyOf,
  resolveStore,
  collections,
  indexes,
  observe,
  docPartitionComponents,
  sameComponents,
  keyEpk,
  itemEpk,
  docEpk,
  rangeIdOf,
  storeKey,
  sameStoreKey,
  stamp,
  stampAs,
  lsnOf,
  effectiveTtl,
  isExpired,
  itemExpired
};
