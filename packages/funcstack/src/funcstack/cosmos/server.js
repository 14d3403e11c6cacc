#!/usr/bin/env node
"use strict";
/*
 * Local Cosmos DB endpoint: a stand-in for an Azure Cosmos DB account, for any app.
 *
 * Built at start-up on top of the unmodified npm package @vercel/cosmosdb-server 1.0.1:
 * its in-memory account model (databases, containers, documents, partition key ranges),
 * its SQL query engine and its routes are reused as they are; this file puts a request
 * handler in front of them that serves the document-level operations itself, closing
 * the gaps of 1.0.1 that the azure-cosmos Python SDK hits (docs/cosmos.md lists them):
 *
 *   - atomic transactional batch (x-ms-cosmos-batch-atomic), 424 for the other ops,
 *     per-op ifMatch, replace/upsert/patch inside a batch, <= 100 operations;
 *   - proper 404 / 409 / 412 / 304 on point operations;
 *   - incremental change feed (A-IM: Incremental feed) with etag (LSN) continuations,
 *     start from beginning / now / point in time, paging, partition-key and EPK scope;
 *   - TTL (container defaultTtl + item ttl), lazily on access plus a periodic sweep;
 *   - queries scoped to the x-ms-documentdb-partitionkey header;
 *   - resource ids in the service's encoding (base64 with '-' for '/');
 *   - offers (throughput: read, query, replace; manual and autoscale);
 *   - the service's default indexing policy, filled in when a container is created;
 *   - management operations refused (403) to Entra ID (AAD) tokens, as data-plane RBAC does;
 *   - HTTP keep-alive.
 * Everything else (databases, containers, pkranges, UDFs, account) goes to the package.
 *
 * CLI: node server.js [--host 127.0.0.1] [--port 0] [--no-ssl] [--log-requests]
 *      [--cert cert.pem --key key.pem] (default: the package's self-signed certificate)
 * Prints one JSON line on stdout when ready: {"ready":true,"port":N,"endpoint":"..."}.
 */

const fs = require("fs");
const http = require("http");
const https = require("https");
const path = require("path");
const crypto = require("crypto");
const { Readable } = require("stream");

const PKG_DIR = path.dirname(require.resolve("@vercel/cosmosdb-server/package.json"));
const Account = require("@vercel/cosmosdb-server/lib/account").default;
const ResourceId = require("@vercel/cosmosdb-server/lib/account/resource-id").default;
const packageRoutes = require("@vercel/cosmosdb-server/lib/routes").default;
const { patchOperation } = require("@vercel/cosmosdb-server/lib/handler/_patch-operations");
const { effectivePartitionKeyV1, effectivePartitionKeyV2 } = require("./epk");
const { engineShape, needsPlan, queryPlan, rewrittenAggregate } = require("./queryplan");
const { Offers, requestedThroughput, DEFAULT_CONTAINER_THROUGHPUT } = require("./offers");

const MAX_BATCH_OPERATIONS = 100;
const MAX_BATCH_BYTES = 2 * 1024 * 1024;
const MAX_DOCUMENT_BYTES = 2 * 1024 * 1024;
const SWEEP_INTERVAL_MS = 1000;
const STATE_FLUSH_MS = 500;
const STATE_VERSION = 2;

// ---------------------------------------------------------------- resource ids
//
// The service writes a resource id (_rid, and so _self) in base64 with '/' replaced by '-'
// (its ResourceId.ToBase64String; the SDKs' parsers turn '-' back into '/'), so an id never
// contains a path separator. 1.0.1 writes plain base64: from about the 63rd document of a
// container ids contain '/', and every SDK call given an item dict (which addresses the item
// by its _self) fails client-side ("Failed Parsing ResourceID from link").

/** A resource id in the service's encoding (idempotent: also converts a 1.0.1 id). */
const serviceRid = rid => String(rid).replace(/\//g, "-");
ResourceId.toBase64String = buffer => serviceRid(buffer.toString("base64"));
// 1.0.1 replaces only the first '-'
ResourceId.fromBase64String = s => Buffer.from(String(s).replace(/-/g, "/"), "base64");

// ---------------------------------------------------------------- errors / responses

class CosmosError extends Error {
  constructor(statusCode, code, message, subStatus) {
    super(message);
    this.statusCode = statusCode;
    this.code = code;
    this.subStatus = subStatus;
  }
}

// SubStatusCodes.CROSS_PARTITION_QUERY_NOT_SERVABLE: the SDK fetches the query plan and merges
const CROSS_PARTITION_QUERY_NOT_SERVABLE = 1004;

const notFound = () =>
  new CosmosError(404, "NotFound", "Entity with the specified id does not exist in the system.");
// As the service answers a document operation whose database or container does not exist:
// 404 with substatus 1003 ("owner resource does not exist"), not a missing document.
const ownerNotFound = () =>
  new CosmosError(404, "NotFound", "Owner resource does not exist.", 1003);
const conflict = () =>
  new CosmosError(409, "Conflict", "Entity with the specified id already exists in the system.");
const preconditionFailed = () =>
  new CosmosError(
    412,
    "PreconditionFailed",
    "Operation cannot be performed because one of the specified precondition is not met."
  );
const badRequest = message => new CosmosError(400, "BadRequest", message);

function send(req, res, statusCode, body, headers = {}) {
  res.statusCode = statusCode;
  res.setHeader("content-type", "application/json");
  res.setHeader("x-ms-activity-id", crypto.randomUUID());
  res.setHeader("x-ms-request-charge", "1");
  res.setHeader("x-ms-serviceversion", "version=2.14.0.0");
  res.setHeader("date", new Date().toUTCString());
  // The partition's LSN after this operation (a write's own LSN; the latest for a read) and
  // the session token built from it, as the service sends them ("<range>:<version>#<lsn>").
  res.setHeader("lsn", String(globalLsn));
  res.setHeader("x-ms-session-token", `0:-1#${globalLsn}`);
  if (body && typeof body === "object" && !Array.isArray(body) && body._etag && !headers.etag) {
    res.setHeader("etag", body._etag);
  }
  for (const [k, v] of Object.entries(headers)) {
    if (v !== undefined && v !== null) res.setHeader(k, v);
  }
  if (body === undefined || statusCode === 204 || statusCode === 304) {
    res.end();
  } else {
    res.end(JSON.stringify(body));
  }
}

function sendError(req, res, err) {
  const headers = {};
  if (err.subStatus !== undefined) headers["x-ms-substatus"] = String(err.subStatus);
  const body = { code: err.code, message: err.message };
  if (err.additionalErrorInfo !== undefined) body.additionalErrorInfo = err.additionalErrorInfo;
  send(req, res, err.statusCode, body, headers);
}

// ---------------------------------------------------------------- request helpers

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", c => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

const tooLarge = () => new CosmosError(413, "RequestEntityTooLarge", "Request size is too large");

async function readJson(req, limit) {
  const raw = await readBody(req);
  if (limit && raw.length > limit) throw tooLarge();
  if (raw.length === 0) return undefined;
  try {
    return JSON.parse(raw.toString("utf8"));
  } catch (e) {
    throw badRequest("The request payload is invalid JSON.");
  }
}

function header(req, name) {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

const isTrue = (req, name) => String(header(req, name) || "").toLowerCase() === "true";

/** Partition key components from the x-ms-documentdb-partitionkey header, or null. */
function headerPartitionKey(req) {
  const raw = header(req, "x-ms-documentdb-partitionkey");
  if (raw === undefined) return null;
  let parsed;
  try {
    parsed = JSON.parse(raw);
  } catch (e) {
    throw badRequest(`Partition key ${raw} is invalid.`);
  }
  if (!Array.isArray(parsed)) parsed = [parsed];
  return parsed;
}

/** The vercel store keys documents by the first partition key value (undefined for `{}`). */
function storeKey(components) {
  if (!components || components.length === 0) return undefined;
  const v = components[0];
  if (v && typeof v === "object") return undefined; // [{}] = undefined / none
  return v;
}

function unquote(etag) {
  return String(etag).replace(/^W\//, "").replace(/^"(.*)"$/, "$1");
}

// ---------------------------------------------------------------- model helpers

let globalLsn = 0;

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

function stamp(doc, lsn) {
  Object.defineProperty(doc, "__lsn", { value: lsn, enumerable: false, configurable: true, writable: true });
  Object.defineProperty(doc, "__mtime", { value: Date.now(), enumerable: false, configurable: true, writable: true });
  // real Cosmos etags are quoted strings
  if (!String(doc._etag).startsWith('"')) doc._etag = `"${doc._etag}"`;
  return doc;
}

function lsnOf(doc) {
  return doc.__lsn || 0;
}

/** Effective TTL in seconds (>0) of a document, or null when it never expires. */
function effectiveTtl(colData, doc) {
  const def = colData.defaultTtl;
  if (def === undefined || def === null) return null; // TTL off on the container
  let ttl = def;
  if (typeof doc.ttl === "number" && Number.isFinite(doc.ttl)) ttl = doc.ttl;
  if (ttl === -1 || ttl <= 0) return null;
  return ttl;
}

function isExpired(colData, doc, now) {
  const ttl = effectiveTtl(colData, doc);
  if (ttl === null) return false;
  const mtime = doc.__mtime || doc._ts * 1000;
  return now >= mtime + ttl * 1000;
}

function stripInternal(doc) {
  return doc; // internal fields are non-enumerable
}

class Store {
  constructor(collection) {
    this.collection = collection;
    this.docs = collection.documents;
  }

  get colData() {
    return this.collection.read();
  }

  /** Live document by id + store key; expired documents are deleted on access. */
  get(id, key) {
    const doc = this.collection.document(id, key === undefined || key === null || key === "" ? id : key).read();
    if (!doc) return null;
    if (key !== undefined && doc && !sameStoreKey(storeKey(docPartitionComponents(this.colData, doc)), key)) {
      return null;
    }
    if (isExpired(this.colData, doc, Date.now())) {
      this.remove(doc);
      return null;
    }
    return doc;
  }

  remove(doc) {
    const key = storeKey(docPartitionComponents(this.colData, doc));
    this.docs.delete(doc.id, key === undefined || key === null || key === "" ? doc.id : key);
  }

  /** All live documents (expired ones are deleted on the way). */
  all() {
    const now = Date.now();
    const colData = this.colData;
    const out = [];
    const expired = [];
    for (const item of this.docs._data.values()) {
      const doc = item.read();
      if (!doc) continue;
      if (isExpired(colData, doc, now)) expired.push(doc);
      else out.push(doc);
    }
    expired.forEach(d => this.remove(d));
    return out;
  }

  insert(body, lsn) {
    return stamp(this.docs.create(body), lsn);
  }

  overwrite(body, old, lsn) {
    return stamp(this.docs.replace(body, old), lsn);
  }

  /** Put a previous version (or absence) back: used to roll back a failed batch. */
  restore(id, key, previous) {
    const current = this.collection.document(id, key === undefined || key === null || key === "" ? id : key).read();
    if (current) this.remove(current);
    if (previous) this.docs._set(previous);
  }
}

function sameStoreKey(a, b) {
  return JSON.stringify(a === undefined ? null : a) === JSON.stringify(b === undefined ? null : b);
}

// ---------------------------------------------------------------- document operations

function validateBody(body) {
  if (!body || typeof body !== "object" || Array.isArray(body)) throw badRequest("The input content is invalid.");
  if (typeof body.id !== "string" || body.id.length === 0) {
    throw badRequest("The input content is invalid because the required properties - 'id; ' - are missing");
  }
  if (/[/\\?#]/.test(body.id)) throw badRequest("The input name is invalid.");
  if (Object.prototype.hasOwnProperty.call(body, "ttl") && !validTtl(body.ttl)) {
    // the service: a ttl must be -1 or a positive integer (0, null and < -1 are refused)
    throw badRequest("The value of attribute 'ttl' is invalid. TTL must be either -1 or a positive integer.");
  }
}

function validTtl(value) {
  return Number.isInteger(value) && (value === -1 || value > 0);
}

function checkPartition(store, body, pk) {
  if (pk === null) return;
  const fromDoc = docPartitionComponents(store.colData, body);
  if (!sameComponents(fromDoc, pk)) {
    throw new CosmosError(
      400,
      "BadRequest",
      "PartitionKey extracted from the document doesn't match the one specified in the header.",
      1001
    );
  }
}

function keyFor(store, body, pk) {
  return pk !== null ? storeKey(pk) : storeKey(docPartitionComponents(store.colData, body));
}

function opCreate(store, body, pk, lsn) {
  validateBody(body);
  checkPartition(store, body, pk);
  const key = keyFor(store, body, pk);
  if (store.get(body.id, key)) throw conflict();
  return { statusCode: 201, doc: store.insert(body, lsn), undo: () => store.restore(body.id, key, null) };
}

function opReplace(store, id, body, pk, ifMatch, lsn) {
  validateBody(body);
  checkPartition(store, body, pk);
  const key = keyFor(store, body, pk);
  const target = id !== undefined ? id : body.id;
  const old = store.get(target, key);
  if (!old) throw notFound();
  if (ifMatch && unquote(ifMatch) !== unquote(old._etag)) throw preconditionFailed();
  if (target === body.id) {
    return { statusCode: 200, doc: store.overwrite(body, old, lsn), undo: () => store.restore(body.id, key, old) };
  }
  // an id is not immutable: a replace whose body names another id renames the document
  // (409 when that id is taken in the partition); the partition key cannot change
  if (store.get(body.id, key)) throw conflict();
  store.remove(old);
  const doc = store.insert(body, lsn);
  return {
    statusCode: 200,
    doc,
    undo: () => {
      store.restore(body.id, key, null);
      store.restore(target, key, old);
    }
  };
}

function opUpsert(store, body, pk, ifMatch, lsn) {
  validateBody(body);
  checkPartition(store, body, pk);
  const key = keyFor(store, body, pk);
  const old = store.get(body.id, key);
  if (ifMatch && (!old || unquote(ifMatch) !== unquote(old._etag))) throw preconditionFailed();
  if (old) {
    return { statusCode: 200, doc: store.overwrite(body, old, lsn), undo: () => store.restore(body.id, key, old) };
  }
  return { statusCode: 201, doc: store.insert(body, lsn), undo: () => store.restore(body.id, key, null) };
}

function opRead(store, id, pk, ifNoneMatch) {
  const doc = store.get(id, storeKey(pk));
  if (!doc) throw notFound();
  if (ifNoneMatch && unquote(ifNoneMatch) === unquote(doc._etag)) {
    return { statusCode: 304, doc, undo: () => {} };
  }
  return { statusCode: 200, doc, undo: () => {} };
}

function opDelete(store, id, pk, ifMatch) {
  const key = storeKey(pk);
  const old = store.get(id, key);
  if (!old) throw notFound();
  if (ifMatch && unquote(ifMatch) !== unquote(old._etag)) throw preconditionFailed();
  store.remove(old);
  return { statusCode: 204, doc: undefined, undo: () => store.restore(id, key, old) };
}

function opPatch(store, id, patch, pk, ifMatch, lsn) {
  const key = storeKey(pk);
  const old = store.get(id, key);
  if (!old) throw notFound();
  if (ifMatch && unquote(ifMatch) !== unquote(old._etag)) throw preconditionFailed();
  let operations;
  let condition;
  if (Array.isArray(patch)) operations = patch;
  else if (patch && Array.isArray(patch.operations)) {
    operations = patch.operations;
    condition = patch.condition;
  } else throw badRequest("Invalid patch request: check syntax of patch specification.");
  if (condition !== undefined && condition !== null) {
    if (!patchConditionHolds(store, old, condition)) {
      throw new CosmosError(412, "PreconditionFailed", "Condition specified in the patch request is not satisfied.");
    }
  }
  const result = patchOperation(store.collection, {
    id,
    partitionKey: JSON.stringify([key === undefined ? {} : key]),
    operations
  });
  if (result.statusCode >= 400) {
    const body = result.body || {};
    throw new CosmosError(result.statusCode, body.code || "BadRequest", body.message || "patch failed");
  }
  const doc = store.get(id, key);
  stamp(doc, lsn);
  return { statusCode: 200, doc, undo: () => store.restore(id, key, old) };
}

/**
 * A patch's filter predicate ("from <alias> where <predicate>", any alias, as the service
 * takes it) evaluated against the document being patched.
 */
function patchConditionHolds(store, doc, condition) {
  const m = /^\s*(?:select\s+\*\s+)?from\s+([A-Za-z_][A-Za-z0-9_]*)\s+where\s+([\s\S]+)$/i.exec(String(condition));
  if (!m) throw badRequest("Invalid condition in patch request: expected 'from <alias> where <predicate>'.");
  const [, alias, predicate] = m;
  let result;
  try {
    result = store.docs.query(
      { query: `SELECT * FROM ${alias} WHERE ${alias}._rid = @rid AND (${predicate})`, parameters: [{ name: "@rid", value: doc._rid }] },
      {}
    );
  } catch (err) {
    throw badRequest(`Invalid condition in patch request: ${err && err.message}`);
  }
  return result.result.length > 0;
}

/**
 * Minimal responses (Prefer: return=minimal, the SDK's no_response=True): the service answers
 * writes with headers only.
 */
function wantsMinimal(req) {
  return /return=minimal/i.test(String(header(req, "prefer") || ""));
}

/**
 * A document addressed by its _self link (/dbs/<rid>/colls/<rid>/docs/<rid>) rather than by
 * names: the last segment is the document's _rid; its id is what the operations key on.
 */
function documentIdOf(account, store, segs) {
  const db = account.database(segs[1]).read();
  const ridBased = db && db._rid === segs[1] && db.id !== segs[1];
  if (!ridBased) return segs[5];
  const item = store.docs._data.get(segs[5]);
  const doc = item && item.read();
  if (!doc) throw notFound();
  return doc.id;
}

/** POST /dbs/{db}/colls/{coll}/operations/partitionkeydelete: every document of one key. */
function handlePartitionKeyDelete(account, req, res, segs) {
  const store = resolveStore(account, segs[1], segs[3]);
  const pk = headerPartitionKey(req);
  if (pk === null) throw badRequest("The partition key to delete must be given (x-ms-documentdb-partitionkey).");
  const key = storeKey(pk);
  for (const doc of store.all()) {
    if (sameStoreKey(storeKey(docPartitionComponents(store.colData, doc)), key)) store.remove(doc);
  }
  globalLsn += 1;
  send(req, res, 200, undefined);
}

// ---------------------------------------------------------------- handlers

function resolveStore(account, dbId, collId) {
  const database = account.database(dbId);
  if (!database.read()) throw ownerNotFound();
  const collection = database.collection(collId);
  if (!collection.read()) throw ownerNotFound();
  return new Store(collection);
}

function docHeaders(doc) {
  return doc ? { etag: doc._etag } : {};
}

function handleBatch(req, res, store, ops) {
  if (!Array.isArray(ops)) throw badRequest("Invalid batch request body.");
  if (ops.length === 0) throw badRequest("Batch request has no operations.");
  if (ops.length > MAX_BATCH_OPERATIONS) {
    throw new CosmosError(400, "BadRequest", "Batch request has more operations than what is supported.");
  }
  const pk = headerPartitionKey(req);
  const atomic = isTrue(req, "x-ms-cosmos-batch-atomic") || header(req, "x-ms-cosmos-batch-atomic") === undefined;
  const lsn = ++globalLsn; // one transaction = one LSN, like the service
  const results = [];
  const undos = [];
  let failedIndex = -1;
  for (let i = 0; i < ops.length; i += 1) {
    const op = ops[i] || {};
    if (failedIndex >= 0 && atomic) {
      results.push({ statusCode: 424, requestCharge: 0 });
      continue;
    }
    try {
      let r;
      const type = String(op.operationType || "");
      switch (type) {
        case "Create":
          r = opCreate(store, op.resourceBody, pk, lsn);
          break;
        case "Upsert":
          r = opUpsert(store, op.resourceBody, pk, op.ifMatch, lsn);
          break;
        case "Replace":
          r = opReplace(store, op.id, op.resourceBody, pk, op.ifMatch, lsn);
          break;
        case "Read":
          r = opRead(store, op.id, pk, op.ifNoneMatch);
          break;
        case "Delete":
          r = opDelete(store, op.id, pk, op.ifMatch);
          break;
        case "Patch":
          r = opPatch(store, op.id, op.resourceBody, pk, op.ifMatch, lsn);
          break;
        default:
          throw badRequest(`Operation type '${type}' is not supported in Batch.`);
      }
      undos.push(r.undo);
      const entry = { statusCode: r.statusCode, requestCharge: 1 };
      if (r.doc) {
        entry.eTag = r.doc._etag;
        entry.resourceBody = r.doc;
      }
      results.push(entry);
    } catch (err) {
      if (!(err instanceof CosmosError)) throw err;
      const entry = { statusCode: err.statusCode, requestCharge: 1, message: err.message };
      if (err.subStatus !== undefined) entry.subStatusCode = err.subStatus;
      results.push(entry);
      if (atomic) {
        failedIndex = i;
        // roll back everything applied so far, newest first, and mark earlier ops 424
        for (let j = undos.length - 1; j >= 0; j -= 1) undos[j]();
        for (let j = 0; j < i; j += 1) results[j] = { statusCode: 424, requestCharge: 0 };
      }
    }
  }
  if (atomic && failedIndex >= 0) {
    // the service answers a failed transactional batch with 207 Multi-Status
    send(req, res, 207, results, { "x-ms-substatus": String(results[failedIndex].subStatusCode || 0) });
    return;
  }
  send(req, res, 200, results);
}

function queryDocuments(store, docs, body, req) {
  const maxItemCount = parseInt(header(req, "x-ms-max-item-count") || "-1", 10);
  const contRaw = header(req, "x-ms-continuation");
  let continuation = null;
  if (contRaw && /^-RID:/.test(contRaw)) {
    // a service-format token (its resource id names another container's pages): the service
    // does not resume from a token that is not for this query, it starts from the beginning
    continuation = null;
  } else if (contRaw) {
    try {
      continuation = JSON.parse(contRaw);
    } catch (e) {
      throw badRequest("Invalid continuation token");
    }
  }
  const colData = store.colData;
  // the service serves an ORDER BY from a composite index in its own order or exactly
  // reversed; the package's engine accepts only the declared order
  // (an order left out is ascending)
  const declared = (((colData.indexingPolicy || {}).compositeIndexes) || []).map(paths =>
    paths.map(index => ({ ...index, order: String(index.order || "ascending").toLowerCase() })));
  const reversed = order => (order === "descending" ? "ascending" : "descending");
  const compositeIndexes = declared.concat(
    declared.map(paths => paths.map(index => ({ ...index, order: reversed(index.order) }))));
  const { query: text, parameters } = renameParameters(body.query, body.parameters || []);
  const options = { parameters, udf: store.docs._userDefinedFunctions(), compositeIndexes };
  const aggregate = rewrittenAggregate(text);
  if (aggregate) return { result: [rangeAggregate(store, docs, aggregate, options)], continuation: null };
  const shape = engineShape(text, parameters, badRequest);
  if (headerPartitionKey(req) === null && shape.aggregateWithoutValue) {
    throw badRequest("Cross partition query only supports 'VALUE <AggregateFunc>' for aggregates.");
  }
  const q = store.docs._getQuery(shape.query);
  try {
    if (!shape.distinct && shape.offset === null) {
      return q.exec(docs, {
        ...options,
        maxItemCount: maxItemCount > 0 ? maxItemCount : undefined,
        continuation
      });
    }
    // DISTINCT and OFFSET/LIMIT, which the package's engine does not parse, are applied to
    // the whole (ordered) result here; pages are cut from it with a continuation of our own.
    let rows = q.exec(docs, options).result;
    if (shape.distinct) {
      const seen = new Set();
      rows = rows.filter(row => {
        const key = canonicalJson(row);
        if (seen.has(key)) return false;
        seen.add(key);
        return true;
      });
    }
    if (shape.offset !== null) rows = rows.slice(shape.offset, shape.offset + shape.limit);
    const start = continuation && Number.isInteger(continuation.local) ? continuation.local : 0;
    const end = maxItemCount > 0 ? start + maxItemCount : rows.length;
    return { result: rows.slice(start, end), continuation: end < rows.length ? { local: end } : null };
  } catch (err) {
    throw badRequest(err.message);
  }
}

/**
 * One partition key range's part of a plan's aggregate (`SELECT VALUE [{"item": AGG(x)}] ...`):
 * `[{"item": value}]`, the value left out where the aggregate has none (MIN/MAX/AVG over no
 * documents), AVG as its sum and count, for the SDK to combine across ranges.
 */
function rangeAggregate(store, docs, aggregate, options) {
  const run = name => {
    const text = `SELECT VALUE ${name}(${aggregate.argument}) ${aggregate.source}`;
    try {
      return store.docs._getQuery(text).exec(docs, options).result[0];
    } catch (err) {
      throw badRequest(err.message);
    }
  };
  if (aggregate.name !== "avg") return [{ item: run(aggregate.name.toUpperCase()) }];
  return [{ item: { sum: run("SUM"), count: run("COUNT") } }];
}

/**
 * Parameters get names of our own and properties named like keywords are read with brackets:
 * the package's parser refuses both where the service's does not. String literals are left
 * as they are.
 */
function renameParameters(text, parameters) {
  const renamed = text.replace(
    /('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|@([A-Za-z_][A-Za-z0-9_]*)|\.((?:value|select|from|where|and|or|not|in|between|top|order|by|asc|desc|true|false|null|undefined|join|exists|array|as|like|offset|limit|distinct|group)[A-Za-z0-9_]+)/gi,
    (match, literal, name, property) => {
      if (literal !== undefined) return literal;
      // a property whose name starts with a keyword (c.value1) trips the package's parser
      if (property !== undefined) return `["${property}"]`;
      return `@p__${name}`;
    });
  return {
    query: renamed,
    parameters: parameters.map(p => (p && typeof p.name === "string" && p.name.startsWith("@")
      ? { ...p, name: `@p__${p.name.slice(1)}` } : p))
  };
}

/** JSON with object keys sorted: DISTINCT compares values, not the order of their fields. */
function canonicalJson(value) {
  if (value === undefined) return "undefined";
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  return `{${Object.keys(value).sort().map(k => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(",")}}`;
}

function sendFeed(req, res, store, result, extra = {}) {
  const headers = { "x-ms-item-count": String(result.result.length), ...extra };
  if (result.continuation) headers["x-ms-continuation"] = JSON.stringify(result.continuation);
  send(req, res, 200, { _rid: store.colData._rid, Documents: result.result, _count: result.result.length }, headers);
}

/** The EPK range a request is scoped to (a feed range), or null for the whole container. */
function epkScope(req) {
  const startEpk = header(req, "x-ms-start-epk");
  const endEpk = header(req, "x-ms-end-epk");
  if (startEpk === undefined || endEpk === undefined || (startEpk === "" && endEpk === "FF")) return null;
  return [startEpk, endEpk];
}

function inEpkScope(colData, doc, scope) {
  const e = docEpk(colData, doc);
  return e === scope[0] || (e >= scope[0] && e < scope[1]);
}

function scopedDocs(req, store) {
  const pk = headerPartitionKey(req);
  const scope = epkScope(req);
  const colData = store.colData;
  let docs = store.all();
  if (pk !== null) docs = docs.filter(d => sameComponents(docPartitionComponents(colData, d), pk));
  if (scope !== null) docs = docs.filter(d => inEpkScope(colData, d, scope));
  return docs;
}

async function handleQuery(req, res, store) {
  let body = await readJson(req);
  if (typeof body === "string") body = { query: body };
  if (!body || typeof body.query !== "string") throw badRequest("missing query");
  if (body.parameters !== undefined && body.parameters !== null && !Array.isArray(body.parameters)) {
    throw badRequest("The query's parameters must be an array of {name, value}.");
  }
  let result;
  if (headerPartitionKey(req) === null && header(req, "x-ms-documentdb-partitionkeyrangeid") === undefined &&
      needsPlan(body.query, body.parameters, badRequest)) {
    // as the service's gateway: the SDK is to fetch the plan and query every range itself
    const err = new CosmosError(400, "BadRequest",
      "Cross partition query with TOP/ORDER BY/OFFSET LIMIT/DISTINCT/aggregates is not servable by the gateway.",
      CROSS_PARTITION_QUERY_NOT_SERVABLE);
    err.additionalErrorInfo = JSON.stringify(queryPlan(body.query, body.parameters, badRequest));
    throw err;
  }
  const started = process.hrtime.bigint();
  const docs = scopedDocs(req, store);
  try {
    result = queryDocuments(store, docs, body, req);
  } catch (err) {
    if (err instanceof CosmosError) throw err;
    throw badRequest(err.message);
  }
  const extra = {};
  if (isTrue(req, "x-ms-documentdb-populatequerymetrics")) {
    extra["x-ms-documentdb-query-metrics"] = queryMetrics(docs, result.result, started);
  }
  sendFeed(req, res, store, result, extra);
}

/**
 * x-ms-documentdb-query-metrics with this endpoint's own figures: it scans every document in
 * scope (no index: indexLookupTimeInMs 0, indexUtilizationRatio 0) and times the execution.
 */
function queryMetrics(scanned, output, started) {
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  const size = rows => rows.reduce((n, r) => n + Buffer.byteLength(JSON.stringify(r === undefined ? null : r)), 0);
  return [
    `totalExecutionTimeInMs=${ms.toFixed(2)}`,
    "queryCompileTimeInMs=0.00",
    "queryLogicalPlanBuildTimeInMs=0.00",
    "queryPhysicalPlanBuildTimeInMs=0.00",
    "queryOptimizationTimeInMs=0.00",
    `VMExecutionTimeInMs=${ms.toFixed(2)}`,
    "indexLookupTimeInMs=0.00",
    "documentLoadTimeInMs=0.00",
    "systemFunctionExecuteTimeInMs=0.00",
    "userFunctionExecuteTimeInMs=0.00",
    `retrievedDocumentCount=${scanned.length}`,
    `retrievedDocumentSize=${size(scanned)}`,
    `outputDocumentCount=${output.length}`,
    `outputDocumentSize=${size(output)}`,
    "writeOutputTimeInMs=0.00",
    "indexUtilizationRatio=0.00"
  ].join(";");
}

function handleReadFeed(req, res, store) {
  const result = queryDocuments(store, scopedDocs(req, store), { query: "SELECT * FROM c" }, req);
  sendFeed(req, res, store, result);
}

function docEpk(colData, doc) {
  const comps = docPartitionComponents(colData, doc).map(v => (v === undefined ? {} : v));
  // a container created with partitionKey.version 1 hashes its keys with V1
  if ((colData.partitionKey || {}).version === 1) return effectivePartitionKeyV1(comps);
  return effectivePartitionKeyV2(comps);
}

function handleChangeFeed(req, res, store) {
  const aim = String(header(req, "a-im") || "");
  if (!/incremental feed/i.test(aim)) {
    throw badRequest(`Change feed mode '${aim}' is not supported by the local endpoint.`);
  }
  const colData = store.colData;
  const ifNoneMatch = header(req, "if-none-match");
  const ifModifiedSince = header(req, "if-modified-since");
  const current = globalLsn;
  let sinceLsn = 0;
  let sinceMs = null;
  if (ifNoneMatch === "*") {
    sinceLsn = current;
  } else if (ifNoneMatch) {
    const n = parseInt(unquote(ifNoneMatch), 10);
    if (!Number.isFinite(n) || n < 0) throw badRequest(`Invalid change feed continuation '${ifNoneMatch}'.`);
    sinceLsn = n;
  } else if (ifModifiedSince) {
    const t = Date.parse(ifModifiedSince);
    if (Number.isNaN(t)) throw badRequest(`Invalid If-Modified-Since '${ifModifiedSince}'.`);
    sinceMs = t;
  }
  const pk = headerPartitionKey(req);
  const scope = epkScope(req);

  let docs = store.all().filter(d => lsnOf(d) > sinceLsn);
  if (sinceMs !== null) docs = docs.filter(d => (d.__mtime || d._ts * 1000) >= sinceMs - (sinceMs % 1000));
  if (pk !== null) docs = docs.filter(d => sameComponents(docPartitionComponents(colData, d), pk));
  if (scope !== null) docs = docs.filter(d => inEpkScope(colData, d, scope));
  docs.sort((a, b) => lsnOf(a) - lsnOf(b) || a.__mtime - b.__mtime);

  const maxItemCount = parseInt(header(req, "x-ms-max-item-count") || "-1", 10);
  let page = docs;
  if (maxItemCount > 0 && docs.length > maxItemCount) {
    // never split one transaction (same LSN) across pages
    let end = maxItemCount;
    while (end < docs.length && lsnOf(docs[end]) === lsnOf(docs[end - 1])) end += 1;
    page = docs.slice(0, end);
  }
  const truncated = page.length < docs.length;
  const etagLsn = truncated ? lsnOf(page[page.length - 1]) : Math.max(current, sinceLsn);
  const etag = `"${etagLsn}"`;
  if (page.length === 0) {
    send(req, res, 304, undefined, { etag, "x-ms-item-count": "0" });
    return;
  }
  const out = page.map(d => ({ ...d, _lsn: lsnOf(d) }));
  send(req, res, 200, { _rid: colData._rid, Documents: out, _count: out.length }, {
    etag,
    "x-ms-item-count": String(out.length),
    lsn: String(current),
    "x-ms-global-committed-lsn": String(current)
  });
}

/** Returns true when the request was handled here (document-level operations). */
async function handleDocuments(account, req, res, segs) {
  if (req.method === "POST" && segs.length === 6 && segs[0] === "dbs" && segs[2] === "colls" &&
      segs[4] === "operations" && segs[5] === "partitionkeydelete") {
    handlePartitionKeyDelete(account, req, res, segs);
    return true;
  }
  // /dbs/{db}/colls/{coll}/docs[/{id}]
  if (segs.length < 5 || segs[0] !== "dbs" || segs[2] !== "colls" || segs[4] !== "docs" || segs.length > 6) {
    return false;
  }
  const store = resolveStore(account, segs[1], segs[3]);
  // As the service answers document operations: the container by name and by resource id,
  // and the partition key range (this endpoint has one, "0"). The SDK files the session
  // token it receives under the container these name.
  const colData = store.colData;
  res.setHeader("x-ms-alt-content-path", `dbs/${account.database(segs[1]).read().id}/colls/${colData.id}`);
  res.setHeader("x-ms-content-path", colData._rid);
  res.setHeader("x-ms-documentdb-partitionkeyrangeid", "0");
  const method = req.method;
  const pk = () => headerPartitionKey(req);
  if (segs.length === 5) {
    if (method === "GET") {
      if (header(req, "a-im")) handleChangeFeed(req, res, store);
      else handleReadFeed(req, res, store);
      return true;
    }
    if (method !== "POST") throw new CosmosError(405, "MethodNotAllowed", "Method not allowed");
    const contentType = String(header(req, "content-type") || "");
    if (isTrue(req, "x-ms-cosmos-is-query-plan-request")) {
      let body = await readJson(req);
      if (typeof body === "string") body = { query: body };
      if (!body || typeof body.query !== "string") throw badRequest("missing query");
      send(req, res, 200, queryPlan(body.query, body.parameters, badRequest));
      return true;
    }
    if (isTrue(req, "x-ms-documentdb-isquery") || contentType.startsWith("application/query+json")) {
      await handleQuery(req, res, store);
      return true;
    }
    const raw = await readBody(req);
    let body;
    try {
      body = JSON.parse(raw.toString("utf8"));
    } catch (e) {
      throw badRequest("The request payload is invalid JSON.");
    }
    if (isTrue(req, "x-ms-cosmos-is-batch-request")) {
      if (raw.length > MAX_BATCH_BYTES) throw tooLarge();
      handleBatch(req, res, store, body);
      return true;
    }
    if (raw.length > MAX_DOCUMENT_BYTES) throw tooLarge();
    const lsn = ++globalLsn;
    const r = isTrue(req, "x-ms-documentdb-is-upsert")
      ? opUpsert(store, body, pk(), header(req, "if-match"), lsn)
      : opCreate(store, body, pk(), lsn);
    send(req, res, r.statusCode, wantsMinimal(req) ? undefined : r.doc, docHeaders(r.doc));
    return true;
  }
  const id = documentIdOf(account, store, segs);
  if (method === "GET") {
    const r = opRead(store, id, pk(), header(req, "if-none-match"));
    send(req, res, r.statusCode, r.statusCode === 304 ? undefined : r.doc, docHeaders(r.doc));
    return true;
  }
  if (method === "DELETE") {
    const r = opDelete(store, id, pk(), header(req, "if-match"));
    globalLsn += 1; // a delete is a write: the session token it answers is a new one
    send(req, res, r.statusCode, undefined);
    return true;
  }
  if (method === "PUT") {
    const body = await readJson(req, MAX_DOCUMENT_BYTES);
    const r = opReplace(store, id, body, pk(), header(req, "if-match"), ++globalLsn);
    send(req, res, r.statusCode, wantsMinimal(req) ? undefined : r.doc, docHeaders(r.doc));
    return true;
  }
  if (method === "PATCH") {
    const body = await readJson(req);
    const r = opPatch(store, id, body, pk(), header(req, "if-match"), ++globalLsn);
    send(req, res, r.statusCode, wantsMinimal(req) ? undefined : r.doc, docHeaders(r.doc));
    return true;
  }
  throw new CosmosError(405, "MethodNotAllowed", "Method not allowed");
}

/**
 * PUT /dbs/{db}/colls/{coll}: 1.0.1 builds a new, empty container object on replace (all
 * documents lost); the service keeps the documents and only changes the settings.
 */
async function handleContainerReplace(account, req, res, segs) {
  if (req.method !== "PUT" || segs.length !== 4 || segs[0] !== "dbs" || segs[2] !== "colls") return false;
  const database = account.database(segs[1]);
  if (!database.read()) throw notFound();
  const collection = database.collection(segs[3]);
  const old = collection.read();
  if (!old) throw notFound();
  const body = await readJson(req);
  if (!body || typeof body !== "object" || body.id !== old.id) throw badRequest("The id of a container cannot change.");
  checkDefaultTtl(body);
  if (JSON.stringify(body.partitionKey || null) !== JSON.stringify(old.partitionKey || null)) {
    throw badRequest("Replacing the partition key of a container is not allowed.");
  }
  const system = Object.fromEntries(Object.entries(old).filter(([k]) => k.startsWith("_")));
  const updated = withContainerDefaults({
    ...body,
    ...system,
    indexingPolicy: completeIndexingPolicy(body.indexingPolicy || old.indexingPolicy),
    geospatialConfig: body.geospatialConfig || old.geospatialConfig,
    conflictResolutionPolicy: body.conflictResolutionPolicy || old.conflictResolutionPolicy,
    _etag: `"${crypto.randomUUID()}"`,
    _ts: Math.floor(Date.now() / 1000)
  });
  collection._data = updated;
  send(req, res, 200, updated);
  return true;
}

// ---------------------------------------------------------------- container settings
//
// The service completes a container's settings and returns them in full: without an indexing
// policy, {"indexingMode":"consistent","automatic":true,"includedPaths":[{"path":"/*"}],
// "excludedPaths":[{"path":"/\"_etag\"/?"}]}; a partial one gets the missing fields and the
// _etag exclusion (mode "none": not automatic, no paths); LastWriterWins on /_ts and the
// Geography type are the conflict resolution and geospatial defaults. 1.0.1 stores only
// {"indexingMode":"consistent"}, so a read-modify-write of the policy fails.

const ETAG_PATH = '/"_etag"/?';

function completeIndexingPolicy(given) {
  const policy = given && typeof given === "object" && !Array.isArray(given) ? { ...given } : {};
  const mode = String(policy.indexingMode || "consistent").toLowerCase();
  policy.indexingMode = mode;
  if (mode === "none") {
    if (policy.automatic === undefined) policy.automatic = false;
    if (!Array.isArray(policy.includedPaths)) policy.includedPaths = [];
    if (!Array.isArray(policy.excludedPaths)) policy.excludedPaths = [];
    return policy;
  }
  if (policy.automatic === undefined) policy.automatic = true;
  if (!Array.isArray(policy.includedPaths)) policy.includedPaths = [{ path: "/*" }];
  const excluded = Array.isArray(policy.excludedPaths) ? policy.excludedPaths : [];
  policy.excludedPaths = excluded.some(e => e && e.path === ETAG_PATH) ? excluded : [...excluded, { path: ETAG_PATH }];
  if (policy.compositeIndexes === undefined || policy.compositeIndexes === null) delete policy.compositeIndexes;
  return policy;
}

function withContainerDefaults(body) {
  const out = { ...body, indexingPolicy: completeIndexingPolicy(body.indexingPolicy) };
  if (!out.conflictResolutionPolicy) {
    out.conflictResolutionPolicy = { mode: "LastWriterWins", conflictResolutionPath: "/_ts", conflictResolutionProcedure: "" };
  }
  if (!out.geospatialConfig || !out.geospatialConfig.type) out.geospatialConfig = { type: "Geography" };
  return out;
}

function checkDefaultTtl(body) {
  if (body && Object.prototype.hasOwnProperty.call(body, "defaultTtl") && body.defaultTtl !== null && !validTtl(body.defaultTtl)) {
    throw badRequest("The value of 'defaultTtl' is invalid. It must be -1 or a positive integer (or omitted to disable TTL).");
  }
}

const isQueryRequest = req =>
  isTrue(req, "x-ms-documentdb-isquery") || String(header(req, "content-type") || "").startsWith("application/query+json");

/**
 * POST /dbs and POST /dbs/{db}/colls (creates, not queries): validate what 1.0.1 accepts
 * blindly (defaultTtl, the throughput headers), complete a container's settings, hand the
 * buffered request to the package, and create the resource's offer once it exists.
 */
async function handleResourceCreate(account, req, res, segs) {
  if (req.method !== "POST" || isQueryRequest(req)) return false;
  const isDatabase = segs.length === 1 && segs[0] === "dbs";
  const isContainer = segs.length === 3 && segs[0] === "dbs" && segs[2] === "colls";
  if (!isDatabase && !isContainer) return false;
  const raw = await readBody(req);
  let body;
  try {
    body = raw.length ? JSON.parse(raw.toString("utf8")) : undefined;
  } catch (e) {
    throw badRequest("The request payload is invalid JSON.");
  }
  let throughput = requestedThroughput(req.headers, badRequest);
  if (isContainer) {
    checkDefaultTtl(body);
    const database = account.database(segs[1]).read();
    if (!throughput && database && !account.offers.forResource(database._rid)) {
      // a container without shared throughput to draw on gets the service's default
      throughput = { manual: DEFAULT_CONTAINER_THROUGHPUT };
    }
    if (body && typeof body === "object" && !Array.isArray(body)) body = withContainerDefaults(body);
  }
  const replay = Readable.from([body === undefined ? raw : Buffer.from(JSON.stringify(body))]);
  replay.method = req.method;
  replay.url = req.url;
  replay.headers = req.headers;
  await handleWithPackage(account, replay, res, (status, created) => {
    if (status === 201 && throughput && created && created._rid) account.offers.create(created, throughput);
  });
  return true;
}

/**
 * DELETE /dbs/{db} and DELETE /dbs/{db}/colls/{coll}: the package deletes; the offers of the
 * resource (and of a database's containers) go with it.
 */
async function handleResourceDelete(account, req, res, segs) {
  if (req.method !== "DELETE" || segs[0] !== "dbs" || (segs.length !== 2 && !(segs.length === 4 && segs[2] === "colls"))) {
    return false;
  }
  const database = account.database(segs[1]);
  const rids = [];
  if (segs.length === 2) {
    const db = database.read();
    if (db) {
      rids.push(db._rid);
      for (const item of database.collections._data.values()) {
        const col = item.read();
        if (col) rids.push(col._rid);
      }
    }
  } else {
    const col = database.collection(segs[3]).read();
    if (col) rids.push(col._rid);
  }
  await handleWithPackage(account, req, res, status => {
    if (status === 204) account.offers.removeFor(rids);
  });
  return true;
}

// ---------------------------------------------------------------- offers

const OFFER_ERRORS = {
  notFound,
  badRequest,
  preconditionFailed
};

/** /offers (read feed, query) and /offers/{rid} (read, replace). */
async function handleOffers(account, req, res, segs) {
  if (segs[0] !== "offers" || segs.length > 2) return false;
  const offers = account.offers;
  if (segs.length === 1) {
    let rows = offers.all();
    if (req.method === "POST" && isQueryRequest(req)) {
      let body = await readJson(req);
      if (typeof body === "string") body = { query: body };
      if (!body || typeof body.query !== "string") throw badRequest("missing query");
      try {
        rows = account.databases._getQuery(body.query).exec(rows, { parameters: body.parameters || [] }).result;
      } catch (err) {
        throw badRequest(err.message);
      }
    } else if (req.method !== "GET") {
      throw new CosmosError(405, "MethodNotAllowed", "Method not allowed");
    }
    send(req, res, 200, { _rid: "", Offers: rows, _count: rows.length }, { "x-ms-item-count": String(rows.length) });
    return true;
  }
  const rid = segs[1];
  if (req.method === "GET") {
    const offer = offers.get(rid);
    if (!offer) throw notFound();
    send(req, res, 200, offer, {
      "x-ms-cosmos-min-throughput": String(offers.minimum(offer)),
      "x-ms-offer-replace-pending": "False"
    });
    return true;
  }
  if (req.method === "PUT") {
    const body = await readJson(req);
    const offer = offers.replace(rid, body, header(req, "if-match"), OFFER_ERRORS);
    send(req, res, 200, offer, { "x-ms-offer-replace-pending": "False" });
    return true;
  }
  throw new CosmosError(405, "MethodNotAllowed", "Method not allowed");
}

/** The 3-byte resource id of the n-th offer, in the service's encoding ("AQAA"). */
function offerRid(n) {
  const rid = new ResourceId();
  rid.offer = String(n);
  return rid.toString();
}

// ---------------------------------------------------------------- Entra ID (AAD) tokens
//
// With an Entra ID token the service authorizes data-plane RBAC actions only (items, queries,
// change feed, reading metadata): creating, replacing or deleting databases and containers and
// replacing throughput are control-plane operations, refused with 403 and sub-status 5300
// (AAD_REQUEST_NOT_AUTHORIZED). Tokens themselves are not checked here.

function isAadRequest(req) {
  let auth = String(header(req, "authorization") || "");
  try {
    auth = decodeURIComponent(auth);
  } catch (e) {
    return false;
  }
  return /(^|&)type=aad(&|$)/i.test(auth);
}

/** The RBAC action a management operation needs, or null for a data-plane operation. */
function managementAction(req, segs) {
  if (isQueryRequest(req) || segs[0] === "_emulators") return null;
  const m = req.method;
  if (segs[0] === "offers") return m === "PUT" ? "throughputSettings/write" : null;
  if (segs[0] !== "dbs") return null;
  if (segs.length === 1) return m === "POST" ? "sqlDatabases/write" : null;
  if (segs.length === 2) return m === "DELETE" ? "sqlDatabases/delete" : null;
  if (segs[2] !== "colls") return m === "GET" ? null : "sqlDatabases/users/write";
  if (segs.length === 3) return m === "POST" ? "sqlDatabases/containers/write" : null;
  if (segs.length === 4) {
    if (m === "PUT") return "sqlDatabases/containers/write";
    if (m === "DELETE") return "sqlDatabases/containers/delete";
    return null;
  }
  if (["sprocs", "triggers", "udfs"].includes(segs[4]) && m !== "GET" && !(m === "POST" && segs.length === 6)) {
    return `sqlDatabases/containers/${segs[4] === "sprocs" ? "storedProcedures" : segs[4] === "udfs" ? "userDefinedFunctions" : "triggers"}/write`;
  }
  return null;
}

function refuseAadManagement(account, req, segs) {
  const action = managementAction(req, segs);
  if (!action || !isAadRequest(req)) return null;
  const resource = segs.join("/");
  return new CosmosError(403, "Forbidden",
    `Request blocked by Auth ${account.read().id} : Request is blocked because principal does not have required ` +
    `RBAC permissions to perform action [Microsoft.DocumentDB/databaseAccounts/${action}] on resource [${resource}]. ` +
    "Management operations are not supported through the data plane with Entra ID tokens. " +
    "Learn more: https://aka.ms/cosmos-native-rbac.", 5300);
}

/**
 * Everything that is not a document operation: the package's own handlers. `onSuccess(status,
 * body)` runs before a success (< 400) is sent.
 */
async function handleWithPackage(account, req, res, onSuccess) {
  const route = packageRoutes(req);
  let body;
  if (!route) {
    send(req, res, 400, { code: "BadRequest", message: "no route" });
    return;
  }
  const [params, handler] = route;
  try {
    body = await handler(account, req, res, params);
  } catch (err) {
    process.stderr.write(`cosmos local: ${err && err.stack}\n`);
    send(req, res, 500, { code: "InternalServerError", message: String(err && err.message) });
    return;
  }
  const status = res.statusCode || 200;
  if (body && Array.isArray(body.PartitionKeyRanges)) {
    // the service's range ids are strings ("0"); the SDK files session tokens under them
    body.PartitionKeyRanges = body.PartitionKeyRanges.map(r => ({
      ...r, id: String(r.id), parents: (r.parents || []).map(String)
    }));
  }
  if (status > 399) {
    const b = body && typeof body === "object" ? body : {};
    const code = b.code || (status === 404 ? "NotFound" : status === 409 ? "Conflict" : "BadRequest");
    send(req, res, status, { code, message: b.message || code });
    return;
  }
  if (onSuccess) onSuccess(status, body);
  if (header(req, "a-im")) {
    // partition key ranges are read as a change feed by the SDK's routing map cache:
    // the set never changes (one range), so any known etag is up to date
    if (header(req, "if-none-match")) {
      send(req, res, 304, undefined, { etag: '"1"' });
      return;
    }
    send(req, res, status, body === undefined ? {} : body, { etag: '"1"' });
    return;
  }
  send(req, res, status, body === undefined ? {} : body);
}

function pathSegments(url) {
  let pathname = url.split("?")[0];
  return pathname
    .split("/")
    .filter(s => s.length > 0)
    .map(s => {
      try {
        return decodeURIComponent(s);
      } catch (e) {
        return s;
      }
    });
}

// ---------------------------------------------------------------- fault injection (local only)
//
// POST /_emulators/faults {"statusCode":429,"count":3,"retryAfterMs":10,"operations":["POST"]}
// makes the next `count` document requests (optionally only those HTTP methods) fail with
// that status (429 carries x-ms-retry-after-ms, like the service). DELETE clears them.

const faults = [];

function takeFault(req, segs) {
  if (faults.length === 0 || segs[0] !== "dbs" || segs[4] !== "docs") return null;
  const i = faults.findIndex(f => !f.operations || f.operations.includes(req.method));
  if (i < 0) return null;
  const f = faults[i];
  f.count -= 1;
  if (f.count <= 0) faults.splice(i, 1);
  return f;
}

async function handleControl(req, res, segs) {
  if (segs[0] !== "_emulators" || segs[1] !== "faults") return false;
  if (req.method === "DELETE") {
    faults.length = 0;
    send(req, res, 204, undefined);
    return true;
  }
  if (req.method === "GET") {
    send(req, res, 200, { faults });
    return true;
  }
  const body = (await readJson(req)) || {};
  const statusCode = parseInt(body.statusCode, 10);
  if (!Number.isInteger(statusCode) || statusCode < 400 || statusCode > 599) throw badRequest("statusCode 4xx/5xx required");
  faults.push({
    statusCode,
    count: Math.max(1, parseInt(body.count || 1, 10)),
    retryAfterMs: Math.max(0, parseInt(body.retryAfterMs || 10, 10)),
    operations: Array.isArray(body.operations) ? body.operations.map(String) : null
  });
  send(req, res, 201, { faults });
  return true;
}

function sendFault(req, res, fault) {
  req.resume();
  const headers = {};
  let code = "ServiceUnavailable";
  if (fault.statusCode === 429) {
    headers["x-ms-retry-after-ms"] = String(fault.retryAfterMs);
    headers["x-ms-substatus"] = "3200";
    code = "TooManyRequests";
  } else if (fault.statusCode === 408) code = "RequestTimeout";
  else if (fault.statusCode < 500) code = "BadRequest";
  send(req, res, fault.statusCode, { code, message: `injected fault ${fault.statusCode}` }, headers);
}

function createRequestListener(getAccount, opts) {
  return (req, res) => {
    if (opts.logRequests) {
      process.stderr.write(`${JSON.stringify({ method: req.method, url: req.url, headers: req.headers })}\n`);
    }
    (async () => {
      const account = getAccount();
      const segs = pathSegments(req.url);
      try {
        if (await handleControl(req, res, segs)) return;
        const fault = takeFault(req, segs);
        if (fault) {
          sendFault(req, res, fault);
          return;
        }
        const refused = refuseAadManagement(account, req, segs);
        if (refused) {
          req.resume();
          throw refused;
        }
        if (await handleDocuments(account, req, res, segs)) return;
        if (await handleOffers(account, req, res, segs)) return;
        if (await handleContainerReplace(account, req, res, segs)) return;
        if (await handleResourceCreate(account, req, res, segs)) return;
        if (await handleResourceDelete(account, req, res, segs)) return;
      } catch (err) {
        if (err instanceof CosmosError) {
          sendError(req, res, err);
          return;
        }
        throw err;
      }
      await handleWithPackage(account, req, res);
    })().catch(err => {
      process.stderr.write(`cosmos local: ${err && err.stack}\n`);
      if (!res.headersSent) send(req, res, 500, { code: "InternalServerError", message: String(err && err.message) });
      else res.end();
    });
  };
}

// ---------------------------------------------------------------- TTL sweep

function sweep(account) {
  if (!account) return;
  for (const dbItem of account.databases._data.values()) {
    const db = dbItem;
    if (!db.read()) continue;
    for (const colItem of db.collections._data.values()) {
      const colData = colItem.read();
      if (!colData || colData.defaultTtl === undefined || colData.defaultTtl === null) continue;
      new Store(colItem).all();
    }
  }
}

// ---------------------------------------------------------------- persistence

/** Every database, container and live document with its LSN, the offers, and the counters
 * that make resource ids, so a restart restores the same _rid / _self / _etag values (the
 * SDK's change feed continuations and the trigger's leases name the container by its _rid). */
function snapshot(account) {
  const dbs = [];
  for (const dbItem of account.databases._data.values()) {
    const db = dbItem.read();
    if (!db) continue;
    const colls = [];
    for (const colItem of dbItem.collections._data.values()) {
      const col = colItem.read();
      if (!col) continue;
      const docs = [];
      for (const item of colItem.documents._data.values()) {
        const doc = item.read();
        if (doc) docs.push({ body: doc, lsn: lsnOf(doc), mtime: doc.__mtime || 0 });
      }
      colls.push({ body: col, ridCount: colItem.documents._ridCount, docs });
    }
    dbs.push({ body: db, ridCount: dbItem.collections._ridCount, colls });
  }
  return {
    version: STATE_VERSION, globalLsn, ridCount: account.databases._ridCount, dbs,
    offers: account.offers.snapshot()
  };
}

/**
 * Load a snapshot. A version 1 file (written before this endpoint used the service's
 * resource-id encoding, filled in container settings and kept offers) is migrated: '/' in
 * resource ids becomes '-' (the same ids, in the service's encoding; _self links follow),
 * containers get the service's default settings, and every container without throughput of
 * its own in a database without shared throughput gets the default 400 RU/s offer it would
 * have had. Ids and LSNs are otherwise kept as they were.
 */
function restore(account, state) {
  if (!state || (state.version !== 1 && state.version !== STATE_VERSION)) {
    throw new Error("unknown state file version");
  }
  const migrating = state.version === 1;
  globalLsn = state.globalLsn;
  account.databases._ridCount = state.ridCount;
  if (!migrating) account.offers.restore(state.offers);
  for (const d of state.dbs) {
    const dbBody = migrating ? migratedIds(d.body, null, "dbs") : d.body;
    account.databases._set(dbBody);
    const dbItem = account.database(dbBody.id);
    dbItem.collections._ridCount = d.ridCount;
    for (const c of d.colls) {
      const colBody = migrating ? withContainerDefaults(migratedIds(c.body, dbBody, "colls")) : c.body;
      dbItem.collections._set(colBody);
      const colItem = dbItem.collection(colBody.id);
      colItem.documents._ridCount = c.ridCount;
      if (migrating) account.offers.create(colItem.read(), { manual: DEFAULT_CONTAINER_THROUGHPUT });
      for (const x of c.docs) {
        const doc = migrating ? migratedIds(x.body, colBody, "docs") : x.body;
        colItem.documents._set(doc);
        Object.defineProperty(doc, "__lsn", { value: x.lsn, enumerable: false, configurable: true, writable: true });
        Object.defineProperty(doc, "__mtime", { value: x.mtime, enumerable: false, configurable: true, writable: true });
      }
    }
  }
}

/** A version 1 body with its _rid in the service's encoding and its _self rebuilt from it. */
function migratedIds(body, parent, kind) {
  const rid = serviceRid(body._rid);
  let self;
  if (kind === "dbs") self = `/dbs/${rid}`;
  else if (kind === "colls") self = `${parent._self}/colls/${rid}`;
  else self = `${parent._self}/docs/${rid}/`;
  return { ...body, _rid: rid, _self: self };
}

/** Write the snapshot atomically (temporary file, then rename). */
function persist(account, file) {
  const tmp = `${file}.tmp`;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(tmp, JSON.stringify(snapshot(account)));
  fs.renameSync(tmp, file);
}

// ---------------------------------------------------------------- main

function parseArgs(argv) {
  const args = { host: "127.0.0.1", port: 0, ssl: true, logRequests: false, cert: null, key: null };
  for (let i = 0; i < argv.length; i += 1) {
    const a = argv[i];
    if (a === "--host") args.host = argv[(i += 1)];
    else if (a === "--port" || a === "-p") args.port = parseInt(argv[(i += 1)], 10);
    else if (a === "--no-ssl") args.ssl = false;
    else if (a === "--log-requests") args.logRequests = true;
    else if (a === "--cert") args.cert = argv[(i += 1)];
    else if (a === "--key") args.key = argv[(i += 1)];
    else if (a === "--state-file") args.stateFile = argv[(i += 1)];
    else if (a === "-h" || a === "--help") {
      process.stdout.write("usage: server.js [--host 127.0.0.1] [--port 0] [--no-ssl] [--log-requests] [--state-file FILE]\n");
      process.exit(0);
    }
  }
  if (!Number.isInteger(args.port) || args.port < 0 || args.port > 65535) {
    process.stderr.write("invalid --port\n");
    process.exit(2);
  }
  return args;
}

function createServer(opts = {}) {
  let account;
  const listener = createRequestListener(() => account, opts);
  const server = opts.ssl === false
    ? http.createServer({ keepAlive: true }, listener)
    : https.createServer(
        {
          cert: fs.readFileSync(opts.cert || path.join(PKG_DIR, "cert.pem")),
          key: fs.readFileSync(opts.key || path.join(PKG_DIR, "key.pem")),
          keepAlive: true
        },
        listener
      );
  server.keepAliveTimeout = 120000;
  server.headersTimeout = 125000;
  server.on("listening", () => {
    const { address, port } = server.address();
    const host = address === "0.0.0.0" || address === "::" ? "localhost" : address;
    account = new Account(host, port);
    account.offers = new Offers(offerRid);
    if (opts.stateFile && fs.existsSync(opts.stateFile)) {
      restore(account, JSON.parse(fs.readFileSync(opts.stateFile, "utf8")));
    }
    if (opts.ssl === false) {
      const meta = account.read();
      for (const loc of [...meta.writableLocations, ...meta.readableLocations]) {
        loc.databaseAccountEndpoint = `http://${host}:${port}/`;
      }
    }
  });
  // With a state file, any change is written within STATE_FLUSH_MS, and once more on stop.
  server.dirty = false;
  if (opts.stateFile) {
    server.on("request", (req, res) => {
      if (req.method !== "GET" && req.method !== "HEAD") res.on("finish", () => { server.dirty = true; });
    });
    const flusher = setInterval(() => server.flush(), STATE_FLUSH_MS);
    flusher.unref();
    server.on("close", () => clearInterval(flusher));
  }
  server.flush = () => {
    if (!opts.stateFile || !account || !server.dirty) return;
    server.dirty = false;
    try {
      persist(account, opts.stateFile);
    } catch (err) {
      server.dirty = true;
      process.stderr.write(`cosmos local state: ${err && err.stack}\n`);
    }
  };
  const timer = setInterval(() => {
    try {
      sweep(account);
    } catch (err) {
      process.stderr.write(`cosmos local sweep: ${err && err.stack}\n`);
    }
  }, SWEEP_INTERVAL_MS);
  timer.unref();
  server.on("close", () => clearInterval(timer));
  return server;
}

if (require.main === module) {
  const args = parseArgs(process.argv.slice(2));
  const server = createServer(args);
  server.listen(args.port, args.host, () => {
    const { port } = server.address();
    const scheme = args.ssl ? "https" : "http";
    const host = args.host.includes(":") ? `[${args.host}]` : args.host;
    process.stdout.write(`${JSON.stringify({ ready: true, port, endpoint: `${scheme}://${host}:${port}/` })}\n`);
  });
  const stop = () => {
    server.flush();
    server.close(() => process.exit(0));
    if (server.closeAllConnections) server.closeAllConnections();
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

module.exports = { createServer };
