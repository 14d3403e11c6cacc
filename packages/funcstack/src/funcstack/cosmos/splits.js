"use strict";
/*
 * Live splits and merges of a container's physical partitions, on request, for the local
 * Cosmos DB endpoint (server.js). The service splits a partition on its own (past 50 GB, or
 * when a throughput raise needs more partitions) and merges partitions when asked through
 * its control plane (`az cosmosdb sql container merge`, "Merge partitions in Azure Cosmos DB",
 * learn.microsoft.com); clients only ever see the result: the old ranges' ids answer
 * 410 / 1002 and /pkranges lists what replaced them with the old ids in their `parents`
 * (ranges.js). Locally either happens when asked, at once:
 *
 *   GET  /_emulators/partitions/{db}/{coll}        the live ranges, with their documents' count
 *   POST /_emulators/partitions/{db}/{coll}/split  {"rangeId": "2"} (optional; default: the
 *        range holding the most documents) -> {"parent": "2", "children": ["4", "5"], ...}
 *   POST /_emulators/partitions/{db}/{coll}/merge  {"rangeIds": ["1", "2"]} (adjacent ranges;
 *        optional: default, the two adjacent ranges holding the fewest documents together)
 *        -> {"parents": ["1", "2"], "merged": "4", ...}
 *
 * The cut is the median EPK of the range's documents, so each child holds about half of them
 * and every partition key stays whole in one child (ranges.js). Local only, like the fault
 * injection: no data-plane call in Azure. A throughput raise past 10,000 RU/s per partition
 * splits as the service does (splitForThroughput, from offers.js), at once instead of in the
 * background. After either, the container's LSN indexes are built again for its new ranges
 * (indexes.js): each document's version keeps the LSN it was written with.
 */

const { CosmosError, badRequest, send } = require("./responses");
const { readJson } = require("./requests");
const { liveRanges, splitAt, mergeRanges, cutPoint } = require("./ranges");
const { Store, collections, itemExpired, itemEpk } = require("./store");
const { forget } = require("./indexes");

/** The container's live ranges with the EPKs of their live documents (sorted). */
function rangesWithEpks(store) {
  const colData = store.colData;
  const now = Date.now();
  const ranges = liveRanges(store.collection).map(range => ({ range, epks: [] }));
  for (const item of store.docs._data.values()) {
    if (itemExpired(colData, item, now)) continue;
    const epk = itemEpk(colData, item);
    const entry = ranges.find(e => epk >= e.range.minInclusive && epk < e.range.maxExclusive);
    if (entry) entry.epks.push(epk);
  }
  for (const entry of ranges) entry.epks.sort();
  return ranges;
}

/**
 * Split one live range of a container (by id; null: the one holding the most documents, the
 * first in EPK order on a tie) at the median EPK of its documents. Returns the parent and the
 * children.
 */
function splitRange(store, rangeId) {
  const ranges = rangesWithEpks(store);
  let chosen;
  if (rangeId === null || rangeId === undefined) {
    chosen = ranges.reduce((best, e) => (e.epks.length > best.epks.length ? e : best), ranges[0]);
  } else {
    chosen = ranges.find(e => e.range.id === String(rangeId));
    if (!chosen) {
      throw badRequest(`No live partition key range '${rangeId}' in container '${store.colData.id}' ` +
        `(live: ${ranges.map(e => e.range.id).join(", ")}).`);
    }
  }
  const cut = cutPoint(store.collection, chosen.range, chosen.epks);
  if (cut === null) {
    throw badRequest(`Partition key range '${chosen.range.id}' of container '${store.colData.id}' ` +
      "cannot be split: it is one EPK wide.");
  }
  const children = splitAt(store.collection, chosen.range.id, cut);
  forget(store.collection);
  return { parent: chosen.range, children };
}

/**
 * Merge adjacent live ranges of a container (by id; null: the two adjacent ranges holding
 * the fewest documents together, the first in EPK order on a tie) into one. Returns the
 * ranges merged and the merged range.
 */
function mergeRange(store, rangeIds) {
  const ranges = rangesWithEpks(store);
  let ids = rangeIds;
  if (ids === null || ids === undefined) {
    if (ranges.length < 2) {
      throw badRequest(`Container '${store.colData.id}' has one physical partition: nothing to merge.`);
    }
    let best = 0;
    for (let i = 1; i + 1 < ranges.length; i += 1) {
      const size = ranges[i].epks.length + ranges[i + 1].epks.length;
      if (size < ranges[best].epks.length + ranges[best + 1].epks.length) best = i;
    }
    ids = [ranges[best].range.id, ranges[best + 1].range.id];
  }
  const parents = ranges.filter(e => ids.map(String).includes(e.range.id)).map(e => e.range);
  const merged = mergeRanges(store.collection, ids);
  forget(store.collection);
  return { parents, merged };
}

/** The live ranges as the control route lists them. */
function listing(store) {
  return rangesWithEpks(store).map(({ range, epks }) => ({
    id: range.id,
    minInclusive: range.minInclusive,
    maxExclusive: range.maxExclusive,
    parents: range.parents,
    documents: epks.length
  }));
}

function controlledStore(account, dbId, collId) {
  const database = account.database(dbId);
  if (!database.read()) throw new CosmosError(404, "NotFound", `No database '${dbId}'.`);
  const collection = database.collection(collId);
  if (!collection.read()) throw new CosmosError(404, "NotFound", `No container '${collId}' in database '${dbId}'.`);
  return new Store(collection);
}

/** /_emulators/partitions/{db}/{coll}[/split|/merge]: true when the request was one of these. */
async function handleRangesControl(account, req, res, segs) {
  if (segs[0] !== "_emulators" || segs[1] !== "partitions") return false;
  const listingRoute = segs.length === 4 && req.method === "GET";
  const action = segs.length === 5 && req.method === "POST" ? segs[4] : null;
  if (!listingRoute && action !== "split" && action !== "merge") {
    req.resume();
    throw new CosmosError(404, "NotFound",
      "Local routes: GET /_emulators/partitions/{db}/{coll}, POST /_emulators/partitions/{db}/{coll}/split, " +
      "POST /_emulators/partitions/{db}/{coll}/merge.");
  }
  const store = controlledStore(account, segs[2], segs[3]);
  if (listingRoute) {
    send(req, res, 200, { ranges: listing(store) });
    return true;
  }
  const body = (await readJson(req)) || {};
  if (typeof body !== "object" || Array.isArray(body)) {
    throw badRequest(action === "split" ? "The body is {\"rangeId\": \"<id>\"} or empty."
      : "The body is {\"rangeIds\": [\"<id>\", \"<id>\", ...]} or empty.");
  }
  if (action === "merge") {
    const ids = body.rangeIds === undefined || body.rangeIds === null ? null : body.rangeIds;
    if (ids !== null && !Array.isArray(ids)) throw badRequest("rangeIds: a list of partition key range ids.");
    const { parents, merged } = mergeRange(store, ids === null ? null : ids.map(String));
    send(req, res, 200, { parents: parents.map(p => p.id), merged: merged.id, ranges: listing(store) });
    return true;
  }
  const rangeId = body.rangeId === undefined || body.rangeId === null ? null : String(body.rangeId);
  const { parent, children } = splitRange(store, rangeId);
  send(req, res, 200, {
    parent: parent.id,
    children: children.map(c => c.id),
    ranges: listing(store)
  });
  return true;
}

/** RU/s one physical partition serves at most (the service's limit per partition). */
const MAX_RUS_PER_PARTITION = 10000;

/**
 * After a container's throughput was replaced: as the service, split (the range holding the
 * most documents, each time) until every partition serves at most 10,000 RU/s of it. The
 * service does so in the background (the offer says isOfferReplacePending meanwhile); here it
 * is done when the replace answers. Returns how many splits were made.
 */
function splitForThroughput(account, offer) {
  const content = offer.content || {};
  const provisioned = content.offerAutopilotSettings
    ? Number(content.offerAutopilotSettings.maxThroughput)
    : Number(content.offerThroughput);
  const needed = Math.ceil(provisioned / MAX_RUS_PER_PARTITION);
  for (const colItem of collections(account)) {
    const colData = colItem.read();
    if (!colData || colData._rid !== offer.offerResourceId) continue;
    const store = new Store(colItem);
    let splits = 0;
    while (liveRanges(colItem).length < needed) {
      splitRange(store, null);
      splits += 1;
    }
    return splits;
  }
  return 0; // a database's shared throughput: its containers' partitions are not modelled
}

module.exports = { handleRangesControl, splitRange, mergeRange, splitForThroughput };
