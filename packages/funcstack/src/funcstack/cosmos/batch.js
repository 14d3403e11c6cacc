"use strict";
/*
 * The transactional batch of the local Cosmos DB endpoint (server.js), as the service runs
 * it (x-ms-cosmos-is-batch-request, one partition key): create / upsert / replace / read /
 * delete / patch with per-operation ifMatch / ifNoneMatch, at most 100 operations and 2 MB.
 * Atomic (x-ms-cosmos-batch-atomic, the default): every operation shares one LSN; when one
 * fails, all applied ones are undone, it keeps its own status, the others get 424, and the
 * batch answers 207 Multi-Status with the failing sub-status (what the SDK parses into
 * CosmosBatchOperationError).
 */

const { CosmosError, badRequest, send } = require("./responses");
const { header, isTrue, headerPartitionKey } = require("./requests");
const { opCreate, opReplace, opUpsert, opRead, opDelete, opPatch } = require("./documents");
const { Write } = require("./lsn");

const MAX_BATCH_OPERATIONS = 100;
const MAX_BATCH_BYTES = 2 * 1024 * 1024;

function handleBatch(req, res, store, ops) {
  if (!Array.isArray(ops)) throw badRequest("Invalid batch request body.");
  if (ops.length === 0) throw badRequest("Batch request has no operations.");
  if (ops.length > MAX_BATCH_OPERATIONS) {
    throw new CosmosError(400, "BadRequest", "Batch request has more operations than what is supported.");
  }
  const pk = headerPartitionKey(req);
  const atomic = isTrue(req, "x-ms-cosmos-batch-atomic") || header(req, "x-ms-cosmos-batch-atomic") === undefined;
  const write = new Write(store.collection); // one transaction = one LSN, like the service
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
          r = opCreate(store, op.resourceBody, pk, write);
          break;
        case "Upsert":
          r = opUpsert(store, op.resourceBody, pk, op.ifMatch, write);
          break;
        case "Replace":
          r = opReplace(store, op.id, op.resourceBody, pk, op.ifMatch, write);
          break;
        case "Read":
          r = opRead(store, op.id, pk, op.ifNoneMatch);
          break;
        case "Delete":
          r = opDelete(store, op.id, pk, op.ifMatch, write);
          break;
        case "Patch":
          r = opPatch(store, op.id, op.resourceBody, pk, op.ifMatch, write);
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
        write.undo(); // nothing of it is kept, nor its LSN
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

module.exports = { handleBatch, MAX_BATCH_BYTES };
