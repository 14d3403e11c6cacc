"use strict";
/*
 * Partitions of the local Cosmos DB endpoint (server.js): where a document lies in the
 * effective partition key (EPK) space and which documents a request is scoped to.
 *
 * As the service: a container created with partitionKey.version 1 hashes its keys with
 * hash V1, others with V2 (epk.js); a request is scoped by the partition key header
 * (`x-ms-documentdb-partitionkey`) and/or a feed range (`x-ms-start-epk` / `x-ms-end-epk`,
 * the whole range "" .. "FF" meaning no scope); partition key range ids are strings ("0").
 * This endpoint has one partition key range, "0", covering the whole EPK space.
 */

const { effectivePartitionKeyV1, effectivePartitionKeyV2 } = require("./epk");
const { header, headerPartitionKey } = require("./requests");
const { docPartitionComponents, sameComponents } = require("./store");

function docEpk(colData, doc) {
  const comps = docPartitionComponents(colData, doc).map(v => (v === undefined ? {} : v));
  // a container created with partitionKey.version 1 hashes its keys with V1
  if ((colData.partitionKey || {}).version === 1) return effectivePartitionKeyV1(comps);
  return effectivePartitionKeyV2(comps);
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
  let docs = pk !== null ? store.inPartition(pk) : store.all();
  if (pk !== null) docs = docs.filter(d => sameComponents(docPartitionComponents(colData, d), pk));
  if (scope !== null) docs = docs.filter(d => inEpkScope(colData, d, scope));
  return docs;
}

/** Partition key ranges as the service lists them: ids (and parents) are strings. */
function servicePartitionKeyRanges(ranges) {
  return ranges.map(r => ({
    ...r, id: String(r.id), parents: (r.parents || []).map(String)
  }));
}

module.exports = { docEpk, epkScope, inEpkScope, scopedDocs, servicePartitionKeyRanges };
