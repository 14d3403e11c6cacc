"use strict";
/*
 * Databases and containers of the local Cosmos DB endpoint (server.js), where the service
 * differs from the package (@vercel/cosmosdb-server 1.0.1):
 *
 *   - create (POST /dbs, POST /dbs/{db}/colls): defaultTtl and the throughput headers
 *     validated, a container's settings completed (settings.js), its offer created
 *     (offers.js; a container without shared throughput gets the default 400 RU/s), its
 *     physical partitions laid out (ranges.js: as its throughput needs, or as many as the
 *     local-only header x-funcstack-physical-partitions asks for);
 *   - replace (PUT /dbs/{db}/colls/{coll}): the settings change, the documents stay;
 *   - delete: the resource's offers (and its containers') go with it;
 *   - delete by partition key (POST .../operations/partitionkeydelete): every document of
 *     one key, one write (one LSN of the key's range; each a delete in the all-versions feed).
 */

const crypto = require("crypto");
const { Readable } = require("stream");
const { notFound, badRequest, send } = require("./responses");
const { readBody, readJson, headerPartitionKey, isQueryRequest } = require("./requests");
const { resolveStore, docPartitionComponents, storeKey, sameStoreKey } = require("./store");
const { completeIndexingPolicy, withContainerDefaults, checkDefaultTtl } = require("./settings");
const { requestedThroughput, DEFAULT_CONTAINER_THROUGHPUT } = require("./offers");
const { handleWithPackage } = require("./passthrough");
const { initialRangeCount, layOut, publicContainer } = require("./ranges");
const { Write } = require("./lsn");

/** POST /dbs/{db}/colls/{coll}/operations/partitionkeydelete: every document of one key. */
function handlePartitionKeyDelete(account, req, res, segs) {
  const store = resolveStore(account, segs[1], segs[3]);
  const pk = headerPartitionKey(req);
  if (pk === null) throw badRequest("The partition key to delete must be given (x-ms-documentdb-partitionkey).");
  const key = storeKey(pk);
  const write = new Write(store.collection); // one write: the key's range's LSN advances once
  for (const doc of store.inPartition(pk)) {
    if (sameStoreKey(storeKey(docPartitionComponents(store.colData, doc)), key)) store.remove(doc, write);
  }
  send(req, res, 200, undefined);
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
  send(req, res, 200, publicContainer(updated));
  return true;
}

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
  // its physical partitions: as asked (local only) or as its throughput needs (ranges.js)
  const rangeCount = isContainer ? initialRangeCount(req.headers, throughput) : 1;
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
    if (status === 201 && isContainer && created && created.id !== undefined) {
      layOut(account.database(segs[1]).collection(created.id), rangeCount);
    }
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

module.exports = {
  handlePartitionKeyDelete,
  handleContainerReplace,
  handleResourceCreate,
  handleResourceDelete
};
