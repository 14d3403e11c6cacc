"use strict";
/*
 * The log the all-versions-and-deletes change feed is read from, for the local Cosmos DB
 * endpoint (server.js, changefeed.js): every create, replace (an upsert or a patch is one of
 * the two) and delete of a container's documents, a time-to-live expiry as a delete, each
 * with the metadata the service gives it. As Microsoft's "Change feed modes in Azure Cosmos
 * DB" (learn.microsoft.com, azure-databases-docs articles/cosmos-db/nosql/change-feed-modes.md,
 * "Parse the response object") shapes them:
 *
 *   create  {"current": <the item>, "metadata": {"operationType": "create", "lsn", "crts"}}
 *   replace {"current": <the item>, "metadata": {"operationType": "replace", "lsn", "crts",
 *            "previousImageLSN"}}
 *   delete  {"current": {}, "metadata": {"operationType": "delete", "lsn", "crts",
 *            "previousImageLSN", "id", "partitionKey": {"<key property>": <value>},
 *            "timeToLiveExpired"}}
 *
 * (the field names are .NET's ChangeFeedMetadataFields, Azure/azure-cosmos-dotnet-v3
 * Microsoft.Azure.Cosmos/src/Resource/FullFidelity; `timeToLiveExpired` true for an expiry,
 * "Deletes from TTL expirations are also captured"; a delete's empty `current`, as
 * azure-cosmos's own test_change_feed_all_versions.py expects of the service, which the page's
 * example leaves out); no previous image, which the service does not give either ("There is
 * currently no way to get the previous version of items").
 *
 * The service keeps these changes for its continuous-backup retention and reads them only
 * from "now" or from a continuation (never from the beginning or a time). The endpoint keeps
 * them in memory from the first all-versions read of a container on (such a read starts
 * "now", so every change after its etag is kept): a container nobody reads that way costs
 * nothing. Each range has its entries in LSN order; a read of a range walks its own and its
 * ancestors' (a split's or a merge's parents), scoped by EPK. A continuation from before the
 * log began (an endpoint started again since: the log is not kept across restarts) is
 * answered 400, as the service answers one outside its retention.
 */

const logs = new WeakMap(); // the package's collection -> Log

class Log {
  constructor(since) {
    this.since = since; // [[min EPK, max EPK, lsn]]: the ranges live at its start, their LSN then
    this.byRange = new Map(); // range id -> entries in LSN order
  }
}

/** Whether a container's all-versions log is kept (something read it so). */
function keeping(collection) {
  return logs.has(collection);
}

/** Start keeping a container's log (from each live range's current LSN on), once. */
function start(collection, ranges, lsnOf) {
  if (!logs.has(collection)) {
    logs.set(collection, new Log(ranges.map(r => [r.minInclusive, r.maxExclusive, lsnOf(r.id)])));
  }
  return logs.get(collection);
}

/** Record one change of the write `write` in the range `rangeId` (undone with the write). */
function record(collection, write, rangeId, entry) {
  const log = logs.get(collection);
  if (!log) return;
  let entries = log.byRange.get(rangeId);
  if (!entries) log.byRange.set(rangeId, (entries = []));
  entries.push(entry);
  write.undos.push(() => {
    const at = entries.lastIndexOf(entry);
    if (at >= 0) entries.splice(at, 1);
  });
}

/** The partition key of a document as the metadata of a delete names it: {property: value}. */
function namedKey(colData, components) {
  const paths = ((colData && colData.partitionKey) || {}).paths || [];
  const named = {};
  paths.forEach((path, i) => {
    named[path.replace(/^\//, "")] = components[i] === undefined ? null : components[i];
  });
  return named;
}

/**
 * The entry of a created or replaced version: `text` its JSON as kept (a string or UTF-8
 * bytes), `previousLsn` the LSN of the version it replaced (null: a create).
 */
function versionEntry(lsn, crts, epk, components, text, previousLsn) {
  return { lsn, crts, epk, components, text, previousLsn, deleted: null };
}

/** The entry of a delete: the deleted version's id, its key, LSN; whether it was an expiry. */
function deleteEntry(lsn, crts, epk, components, id, colData, previousLsn, ttlExpired) {
  return { lsn, crts, epk, components, text: null, previousLsn, deleted: { id, key: namedKey(colData, components), ttlExpired } };
}

/** An entry as the service answers it (its change feed item). */
function answered(entry) {
  const metadata = {
    operationType: entry.deleted ? "delete" : entry.previousLsn === null ? "create" : "replace",
    lsn: entry.lsn,
    crts: entry.crts
  };
  if (entry.previousLsn !== null) metadata.previousImageLSN = entry.previousLsn;
  if (entry.deleted) {
    metadata.id = entry.deleted.id;
    metadata.partitionKey = entry.deleted.key;
    metadata.timeToLiveExpired = entry.deleted.ttlExpired;
    return { current: {}, metadata };
  }
  const text = typeof entry.text === "string" ? entry.text : entry.text.toString("utf8");
  return { current: JSON.parse(text), metadata };
}

/** First position whose entry's LSN is > `lsn`. */
function after(entries, lsn) {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (entries[mid].lsn <= lsn) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Whether the log has every change after `sinceLsn` in the EPK span [min, max): it does
 * unless a range live when it began, overlapping that span, was past `sinceLsn` then.
 */
function covers(collection, min, max, sinceLsn) {
  const log = logs.get(collection);
  if (!log) return false;
  return log.since.every(([lo, hi, lsn]) => !(lo < max && min < hi) || sinceLsn >= lsn);
}

/**
 * The entries after `sinceLsn` of the live range `range` (its own and its ancestors'), that
 * `inScope(entry)` accepts, in LSN order.
 */
function changesSince(collection, range, sinceLsn, inScope) {
  const log = logs.get(collection);
  if (!log) return [];
  const found = [];
  for (const id of [...range.parents, range.id]) {
    const entries = log.byRange.get(id);
    if (!entries) continue;
    for (let i = after(entries, sinceLsn); i < entries.length; i += 1) {
      if (inScope(entries[i])) found.push(entries[i]);
    }
  }
  // a merge's parents' entries interleave; one range's (and its lineage's) are in order
  return found.sort((a, b) => a.lsn - b.lsn);
}

module.exports = { keeping, start, record, versionEntry, deleteEntry, answered, covers, changesSince };
