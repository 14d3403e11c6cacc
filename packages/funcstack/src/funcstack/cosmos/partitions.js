"use strict";
/*
 * Partitions of the local Cosmos DB endpoint (server.js): where a document lies in the
 * effective partition key (EPK) space, which physical partition (partition key range,
 * ranges.js) holds it, and which documents a request is scoped to. The one place a request's
 * scope is decided, for queries, the read feed and the change feed alike.
 *
 * As the service: a container created with partitionKey.version 1 hashes its keys with
 * hash V1, others with V2 (epk.js); a request is scoped by
 *   - the partition key range it names (`x-ms-documentdb-partitionkeyrangeid`, what the SDKs
 *     send for the change feed of a physical partition and for each range of a query they
 *     merge): only that range's documents; a range that was split answers 410 with
 *     sub-status 1002 (ranges.js);
 *   - a feed range (`x-ms-start-epk` / `x-ms-end-epk`, the whole range "" .. "FF" meaning no
 *     scope), within that range;
 *   - the partition key header (`x-ms-documentdb-partitionkey`).
 * A document operation lands in the range that holds its key's EPK; responses name the
 * range(s) a request read or wrote (`x-ms-documentdb-partitionkeyrangeid` when one, and the
 * session token, one "<range>:-1#<lsn>" per range, each with that range's own LSN). A
 * document's EPK is store.js's (the store places and indexes documents by it).
 */

const { header, headerPartitionKey } = require("./requests");
const { docPartitionComponents, sameComponents, keyEpk, itemEpk, docEpk } = require("./store");
const { liveRange, liveRanges, rangeOfEpk, overlapping, rangeLsn } = require("./ranges");

/** The EPK range a request is scoped to (a feed range), or null for the whole container. */
function epkScope(req) {
  const startEpk = header(req, "x-ms-start-epk");
  const endEpk = header(req, "x-ms-end-epk");
  if (startEpk === undefined || endEpk === undefined || (startEpk === "" && endEpk === "FF")) return null;
  return [startEpk, endEpk];
}

function inEpkRange(epk, scope) {
  return epk === scope[0] || (epk >= scope[0] && epk < scope[1]);
}

/**
 * What a request to a container's documents is scoped to: `{ pk, range, epk, ranges }` — the
 * partition key header's components (or null), the range it names (or null, also when that
 * range is the container's only one; 410 / 1002 when that range is gone), the feed range (or
 * null) and the live ranges it touches.
 */
function requestScope(req, store) {
  const owner = store.collection;
  const colData = store.colData;
  const pk = headerPartitionKey(req);
  const rangeId = header(req, "x-ms-documentdb-partitionkeyrangeid");
  const range = rangeId !== undefined ? liveRange(owner, rangeId) : null;
  const epk = epkScope(req);
  // a range spanning the whole container (its only one) scopes nothing
  const scoping = range !== null && !(range.minInclusive === "" && range.maxExclusive === "FF") ? range : null;
  let ranges;
  if (range !== null) ranges = [range];
  else if (pk !== null) ranges = [rangeOfEpk(owner, keyEpk(colData, pk))];
  else if (epk !== null) ranges = overlapping(owner, epk[0], epk[1] === epk[0] ? `${epk[0]}0` : epk[1]);
  else ranges = liveRanges(owner);
  return { pk, range: scoping, epk, ranges };
}

/** Whether a document is in a request's scope (requestScope). */
function inScope(colData, doc, scope) {
  if (scope.pk !== null && !sameComponents(docPartitionComponents(colData, doc), scope.pk)) return false;
  if (scope.range === null && scope.epk === null) return true;
  const e = docEpk(colData, doc);
  if (scope.range !== null && !(e >= scope.range.minInclusive && e < scope.range.maxExclusive)) return false;
  return scope.epk === null || inEpkRange(e, scope.epk);
}

/**
 * Whether a stored document (store.js StoredDocument) is in a request's scope, told from what
 * is kept beside its text.
 */
function itemInScope(colData, item, scope) {
  if (scope.pk !== null && !sameComponents(item.components(), scope.pk)) return false;
  if (scope.range === null && scope.epk === null) return true;
  const e = itemEpk(colData, item);
  if (scope.range !== null && !(e >= scope.range.minInclusive && e < scope.range.maxExclusive)) return false;
  return scope.epk === null || inEpkRange(e, scope.epk);
}

/** The live range that holds a partition key (its components). */
function rangeOfKey(store, components) {
  return rangeOfEpk(store.collection, keyEpk(store.colData, components));
}

/**
 * Name the range(s) a request works on in its answer: `x-ms-documentdb-partitionkeyrangeid`
 * when it is one, and, read when the answer is sent (after the write), each one's latest LSN
 * for its session token (responses.js). `owner` is the package's collection.
 */
function answerFor(res, owner, ranges) {
  res.rangeLsns = () => ranges.map(r => [r.id, rangeLsn(owner, r.id)]);
  if (ranges.length === 1) res.setHeader("x-ms-documentdb-partitionkeyrangeid", ranges[0].id);
  else res.removeHeader("x-ms-documentdb-partitionkeyrangeid");
}

module.exports = {
  docEpk,
  itemEpk,
  itemInScope,
  epkScope,
  inEpkRange,
  requestScope,
  inScope,
  rangeOfKey,
  answerFor
};
