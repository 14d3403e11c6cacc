"use strict";
/*
 * The change feed of the local Cosmos DB endpoint (server.js), as the service serves it to
 * the SDKs and the Functions trigger, one physical partition (partition key range) at a time:
 *
 *   - latest version (`A-IM: Incremental feed`): the latest version of each document changed
 *     after the continuation, in LSN order, each with its `_lsn`;
 *   - all versions and deletes (`A-IM: Full-Fidelity Feed`, with the wire format version
 *     header `x-ms-cosmos-changefeed-wire-format-version` the SDKs send): every create,
 *     replace and delete after the continuation, each with its metadata (allversions.js has
 *     the shapes and their source); only from "now" or a continuation, as the service reads it
 *     (400 from the beginning or a time, as the SDKs refuse those themselves).
 *
 * The continuation is the `etag` ("<lsn>") of the range read: its own LSN (lsn.js), so the
 * etags of two ranges are not comparable, and a split's children and a merge's range carry on
 * from their parents' LSNs (ranges.js): a parent's continuation is valid on what replaced it,
 * read within the parent's EPK span (what the SDKs send after a merge). Start from the
 * beginning (no If-None-Match), now (If-None-Match: *) or a point in time
 * (If-Modified-Since); pages of x-ms-max-item-count that never split one transaction (one
 * LSN); scoped to a partition key range, a feed range or a partition key (partitions.js), one
 * range at a time (a request over several ranges reads the first, `rangeRead`); 304 with an
 * unchanged etag when nothing is new. The answer's session token, `lsn` and
 * `x-ms-global-committed-lsn` are the range's latest LSN, what the estimators subtract from.
 * The latest version is read from the range's LSN index (store.changedSince, indexes.js), as
 * the service reads its log from a position: a poll costs what was written since its
 * continuation.
 */

const { badRequest, send } = require("./responses");
const { header, unquote } = require("./requests");
const { lsnOf, sameComponents } = require("./store");
const { requestScope, inScope, inEpkRange, answerFor } = require("./partitions");
const { rangeLsn, liveRanges } = require("./ranges");
const allVersions = require("./allversions");

const INCREMENTAL = /^\s*incremental feed\s*$/i;
const FULL_FIDELITY = /^\s*full-fidelity feed\s*$/i;

/** Where a read starts: {sinceLsn, sinceMs} from its headers ("now" is the range's `current`). */
function startOf(req, current) {
  const ifNoneMatch = header(req, "if-none-match");
  const ifModifiedSince = header(req, "if-modified-since");
  if (ifNoneMatch === "*") return { sinceLsn: current, sinceMs: null, from: "now" };
  if (ifNoneMatch) {
    const n = parseInt(unquote(ifNoneMatch), 10);
    if (!Number.isFinite(n) || n < 0) throw badRequest(`Invalid change feed continuation '${ifNoneMatch}'.`);
    return { sinceLsn: n, sinceMs: null, from: "continuation" };
  }
  if (ifModifiedSince) {
    const t = Date.parse(ifModifiedSince);
    if (Number.isNaN(t)) throw badRequest(`Invalid If-Modified-Since '${ifModifiedSince}'.`);
    return { sinceLsn: 0, sinceMs: t, from: "time" };
  }
  return { sinceLsn: 0, sinceMs: null, from: "beginning" };
}

/**
 * The one live range a change feed request reads: its scope's; of a scope over several (no
 * range named: the SDKs always name one, but azure-cosmos's `partition_key_range_id=` path
 * sends none), the first in EPK order, as the service's gateway answers it: the changes of the
 * first partition only (azure-sdk-for-python#34922, "query_items_change_feed only processes
 * first partition then stops").
 */
function rangeRead(res, store, scope) {
  if (scope.ranges.length > 1) answerFor(res, store.collection, [scope.ranges[0]]);
  return scope.ranges[0];
}

/**
 * A page of what `changes` yields (in LSN order, each with `lsnOf(change)`), at most
 * `maxItemCount` (<= 0: no limit) but never splitting one LSN; `truncated` when more follow.
 */
function pageOf(changes, maxItemCount, lsnOfChange) {
  const page = [];
  let truncated = false;
  for (const change of changes) {
    if (maxItemCount > 0 && page.length >= maxItemCount &&
        lsnOfChange(change) !== lsnOfChange(page[page.length - 1])) {
      truncated = true;
      break;
    }
    page.push(change);
  }
  return { page, truncated };
}

function handleChangeFeed(req, res, store) {
  const aim = String(header(req, "a-im") || "");
  const fullFidelity = FULL_FIDELITY.test(aim);
  if (!fullFidelity && !INCREMENTAL.test(aim)) {
    throw badRequest(`Change feed mode '${aim}' is not supported: 'Incremental feed' (latest version) or ` +
      "'Full-Fidelity Feed' (all versions and deletes).");
  }
  const scope = requestScope(req, store);
  const range = rangeRead(res, store, scope);
  const current = rangeLsn(store.collection, range.id);
  const start = startOf(req, current);
  const maxItemCount = parseInt(header(req, "x-ms-max-item-count") || "-1", 10);
  const read = fullFidelity
    ? allVersionsPage(store, scope, range, start, maxItemCount)
    : latestVersionPage(store, scope, range, start, maxItemCount);
  const etag = `"${read.truncated ? read.lastLsn : Math.max(current, start.sinceLsn)}"`;
  if (read.items.length === 0) {
    send(req, res, 304, undefined, { etag, "x-ms-item-count": "0" });
    return;
  }
  send(req, res, 200, { _rid: store.colData._rid, Documents: read.items, _count: read.items.length }, {
    etag,
    "x-ms-item-count": String(read.items.length)
  });
}

/** The latest version of each document changed in `range` after the start (the LSN index). */
function latestVersionPage(store, scope, range, start, maxItemCount) {
  const colData = store.colData;
  const sinceMs = start.sinceMs;
  function* changes() {
    for (const d of store.changedSince(range.id, start.sinceLsn)) {
      if (sinceMs !== null && (d.__mtime || d._ts * 1000) < sinceMs - (sinceMs % 1000)) continue;
      if (inScope(colData, d, scope)) yield d;
    }
  }
  const { page, truncated } = pageOf(changes(), maxItemCount, lsnOf);
  return {
    items: page.map(d => ({ ...d, _lsn: lsnOf(d) })),
    truncated,
    lastLsn: page.length ? lsnOf(page[page.length - 1]) : null
  };
}

/** Every change in `range` after the start, from the all-versions log (allversions.js). */
function allVersionsPage(store, scope, range, start, maxItemCount) {
  const owner = store.collection;
  if (start.from === "beginning" || start.from === "time") {
    throw badRequest("The all versions and deletes change feed (Full-Fidelity Feed) starts from now or from a " +
      `continuation, not from ${start.from === "time" ? "a point in time" : "the beginning"}.`);
  }
  allVersions.start(owner, liveRanges(owner), id => rangeLsn(owner, id));
  const [min, max] = spanRead(scope, range);
  if (!allVersions.covers(owner, min, max, start.sinceLsn)) {
    throw badRequest(`The all versions and deletes change feed of container '${store.colData.id}' has no ` +
      `changes kept from LSN ${start.sinceLsn} on in partition key range '${range.id}': the local endpoint ` +
      "keeps them from the first such read while it runs (as the service keeps them for its retention).");
  }
  const inSpan = entry => entry.epk >= range.minInclusive && entry.epk < range.maxExclusive &&
    (scope.epk === null || inEpkRange(entry.epk, scope.epk)) &&
    (scope.pk === null || sameComponents(entry.components, scope.pk));
  const changes = allVersions.changesSince(owner, range, start.sinceLsn, inSpan);
  const { page, truncated } = pageOf(changes, maxItemCount, e => e.lsn);
  return {
    items: page.map(allVersions.answered),
    truncated,
    lastLsn: page.length ? page[page.length - 1].lsn : null
  };
}

/** The EPK span a read covers: its range's, narrowed to its feed range. */
function spanRead(scope, range) {
  let min = range.minInclusive;
  let max = range.maxExclusive;
  if (scope.epk !== null) {
    if (scope.epk[0] > min) min = scope.epk[0];
    if (scope.epk[1] < max && scope.epk[1] !== scope.epk[0]) max = scope.epk[1];
  }
  return [min, max];
}

module.exports = { handleChangeFeed };
