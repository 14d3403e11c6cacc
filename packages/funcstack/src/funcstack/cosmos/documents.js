"use strict";
/*
 * Point operations on documents for the local Cosmos DB endpoint (server.js), as the service
 * answers them: create (409 when the id is taken), replace (an id may change: a rename),
 * upsert, read (304 on a matching If-None-Match), delete, patch (with the service's
 * conditional patch: a filter predicate, any alias, 412 when unmet); 404 for a missing
 * document, 412 for a stale If-Match, 400 for an invalid body, id or ttl and for a body whose
 * partition key is not the header's (sub-status 1001).
 *
 * Each operation works on a Store (store.js) as a part of a write (`write`, lsn.js: its LSN in
 * the range the document lands in) and returns {statusCode, doc, undo}: `undo` puts the
 * previous version back, which the transactional batch (batch.js) uses to roll back.
 */

const { CosmosError, notFound, conflict, preconditionFailed, badRequest } = require("./responses");
const { unquote } = require("./requests");
const { docPartitionComponents, sameComponents, storeKey } = require("./store");
const { validTtl } = require("./ttl");
const { evaluate } = require("./queryrun");

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

function opCreate(store, body, pk, write) {
  validateBody(body);
  checkPartition(store, body, pk);
  const key = keyFor(store, body, pk);
  if (store.get(body.id, key)) throw conflict();
  return { statusCode: 201, doc: store.insert(body, write), undo: () => store.restore(body.id, key, null) };
}

function opReplace(store, id, body, pk, ifMatch, write) {
  validateBody(body);
  checkPartition(store, body, pk);
  const key = keyFor(store, body, pk);
  const target = id !== undefined ? id : body.id;
  const old = store.get(target, key);
  if (!old) throw notFound();
  if (ifMatch && unquote(ifMatch) !== unquote(old._etag)) throw preconditionFailed();
  if (target === body.id) {
    return { statusCode: 200, doc: store.overwrite(body, old, write), undo: () => store.restore(body.id, key, old) };
  }
  // an id is not immutable: a replace whose body names another id renames the document
  // (409 when that id is taken in the partition); the partition key cannot change
  if (store.get(body.id, key)) throw conflict();
  store.remove(old, write);
  const doc = store.insert(body, write);
  return {
    statusCode: 200,
    doc,
    undo: () => {
      store.restore(body.id, key, null);
      store.restore(target, key, old);
    }
  };
}

function opUpsert(store, body, pk, ifMatch, write) {
  validateBody(body);
  checkPartition(store, body, pk);
  const key = keyFor(store, body, pk);
  const old = store.get(body.id, key);
  if (ifMatch && (!old || unquote(ifMatch) !== unquote(old._etag))) throw preconditionFailed();
  if (old) {
    return { statusCode: 200, doc: store.overwrite(body, old, write), undo: () => store.restore(body.id, key, old) };
  }
  return { statusCode: 201, doc: store.insert(body, write), undo: () => store.restore(body.id, key, null) };
}

function opRead(store, id, pk, ifNoneMatch) {
  const doc = store.get(id, storeKey(pk));
  if (!doc) throw notFound();
  if (ifNoneMatch && unquote(ifNoneMatch) === unquote(doc._etag)) {
    return { statusCode: 304, doc, undo: () => {} };
  }
  return { statusCode: 200, doc, undo: () => {} };
}

function opDelete(store, id, pk, ifMatch, write) {
  const key = storeKey(pk);
  const old = store.get(id, key);
  if (!old) throw notFound();
  if (ifMatch && unquote(ifMatch) !== unquote(old._etag)) throw preconditionFailed();
  store.remove(old, write);
  return { statusCode: 204, doc: undefined, undo: () => store.restore(id, key, old) };
}

function opPatch(store, id, patch, pk, ifMatch, write) {
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
  const result = store.applyPatch(id, key, operations, write);
  if (result.statusCode >= 400) {
    const body = result.body || {};
    throw new CosmosError(result.statusCode, body.code || "BadRequest", body.message || "patch failed");
  }
  return { statusCode: 200, doc: result.doc, undo: () => store.restore(id, key, old) };
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
    result = evaluate(store, `SELECT * FROM ${alias} WHERE ${predicate}`, [doc]);
  } catch (err) {
    throw badRequest(`Invalid condition in patch request: ${err && err.message}`);
  }
  return result.result.length > 0;
}

/**
 * A document addressed by its _self link (/dbs/<rid>/colls/<rid>/docs/<rid>) rather than by
 * names: the last segment is the document's _rid; its id is what the operations key on.
 */
function documentIdOf(account, store, segs) {
  const db = account.database(segs[1]).read();
  const ridBased = db && db._rid === segs[1] && db.id !== segs[1];
  if (!ridBased) return segs[5];
  const doc = store.byRid(segs[5]);
  if (!doc) throw notFound();
  return doc.id;
}

function docHeaders(doc) {
  return doc ? { etag: doc._etag } : {};
}

module.exports = {
  opCreate,
  opReplace,
  opUpsert,
  opRead,
  opDelete,
  opPatch,
  documentIdOf,
  docHeaders
};
