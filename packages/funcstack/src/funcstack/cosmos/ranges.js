"use strict";
/*
 * Physical partitions of a container of the local Cosmos DB endpoint (server.js): its
 * partition key ranges, as the service keeps and serves them (the REST resource
 * `/dbs/{db}/colls/{coll}/pkranges`, the .NET SDK's `PartitionKeyRange` type and its
 * `PartitionKeyRangeCache`, the Python SDK's `_routing/routing_map_provider.py`):
 *
 *   - a container's live ranges tile the effective partition key (EPK) space "" .. "FF"
 *     without gap or overlap; each has a string id, `minInclusive` / `maxExclusive`,
 *     `parents` (every ancestor's id, oldest first), `ridPrefix`, `throughputFraction`,
 *     `status` "online" and the `lsn` at which it appeared;
 *   - a container starts with the ranges asked for (`x-funcstack-physical-partitions` on its
 *     create, local only) or, as the service, with as many as its throughput needs (manual:
 *     one per 6,000 RU/s; autoscale: one per 10,000 RU/s of its maximum), whichever is more;
 *     they cut the space its hash uses (V2: 0 .. 0x3FFF..., the top two bits of an EPK are
 *     clear; V1: the 32-bit hash) into equal parts, as the service lays out a new container;
 *   - a split replaces one range by two children that carry it on: the parent's id is gone
 *     (a request naming it answers 410 with sub-status 1002, PartitionKeyRangeGone, which is
 *     what makes the SDKs refresh their routing map) and the children name it in `parents`;
 *   - the ranges are read as a change feed (`A-IM: Incremental feed`): without If-None-Match
 *     every live range and an etag; with the etag of an earlier read only the ranges that
 *     appeared since (a split's children, whose `parents` tell the SDK which range they
 *     replace), 304 when there are none. The SDK merges them into the routing map it caches.
 *
 * The ranges live in the container's stored body (STATE, never sent to clients), so whatever
 * keeps the container across restarts keeps them. This module knows EPK strings only: which
 * documents a range holds is for partitions.js (a document's EPK) and splits.js (the split
 * asked for).
 */

const crypto = require("crypto");
const { CosmosError, badRequest, send } = require("./responses");
const { header, unquote } = require("./requests");
const { v1HashBoundary } = require("./epk");

/** Where a container's ranges are kept in its stored body (local only, stripped from answers). */
const STATE = "_localPartitionKeyRanges";
/** What the header on a container create may ask for (the service's accounts split further). */
const MAX_INITIAL_RANGES = 64;
/** RU/s a new container gets one physical partition for (manual; autoscale: its maximum per
 * 10,000), as the service lays out a new container (the SDK's own tests rely on it:
 * THROUGHPUT_FOR_5_PARTITIONS = 30,000). */
const MANUAL_RUS_PER_PARTITION = 6000;
const AUTOSCALE_RUS_PER_PARTITION = 10000;
const EPK_DIGITS = 32;
const FULL_MIN = "";
const FULL_MAX = "FF";

const isV1 = colData => ((colData && colData.partitionKey) || {}).version === 1;

/** The EPK sub-space a container's hash lands in: [low, high) as hex strings. */
function hashSpace(colData) {
  return isV1(colData) ? ["05", "06"] : [FULL_MIN, "40"];
}

/** A hex EPK string as a fixed-point number of EPK_DIGITS digits ("" is 0). */
function epkValue(epk) {
  const digits = String(epk).slice(0, EPK_DIGITS).padEnd(EPK_DIGITS, "0");
  return BigInt(`0x${digits}`);
}

function epkString(value) {
  return value.toString(16).toUpperCase().padStart(EPK_DIGITS, "0");
}

/** The EPK halfway between two (as strings: low < result < high), or null when none is. */
function midpoint(low, high) {
  const lo = epkValue(low);
  const hi = epkValue(high);
  if (hi - lo < 2n) return null;
  const mid = epkString((lo + hi) / 2n);
  return mid > low && mid < high ? mid : null;
}

/** The boundaries that cut a new container's hash space into `count` equal ranges. */
function layoutBoundaries(colData, count) {
  const out = [];
  if (isV1(colData)) {
    // the V1 EPK starts with the 32-bit hash as a number in the orderable encoding
    for (let k = 1; k < count; k += 1) out.push(v1HashBoundary(Math.floor((k * 2 ** 32) / count)));
    return out;
  }
  const top = 1n << 126n; // V2 EPKs have their top two bits clear
  for (let k = 1; k < count; k += 1) out.push(epkString((top * BigInt(k)) / BigInt(count)));
  return out;
}

/** How many ranges a container starts with: the header's count or its throughput's, the most. */
function initialRangeCount(headers, throughput) {
  const raw = headers["x-funcstack-physical-partitions"];
  let asked = 1;
  if (raw !== undefined) {
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1 || n > MAX_INITIAL_RANGES) {
      throw badRequest(`x-funcstack-physical-partitions must be an integer from 1 to ${MAX_INITIAL_RANGES}, not '${raw}'.`);
    }
    asked = n;
  }
  let byThroughput = 1;
  if (throughput && throughput.manual) byThroughput = Math.ceil(throughput.manual / MANUAL_RUS_PER_PARTITION);
  else if (throughput && throughput.autoscale) {
    byThroughput = Math.ceil(Number(throughput.autoscale.maxThroughput) / AUTOSCALE_RUS_PER_PARTITION);
  }
  return Math.max(asked, byThroughput, 1);
}

/** A range as the service lists it; `owner` is the package's collection (its resource ids). */
function newRange(owner, colData, id, min, max, parents, lsn) {
  const rid = owner.partitionKeyRanges._rid(id);
  return {
    id: String(id),
    _rid: rid,
    _self: `${String(colData._self).replace(/\/$/, "")}/pkranges/${rid}/`,
    _etag: `"${crypto.randomUUID()}"`,
    _ts: Math.floor(Date.now() / 1000),
    minInclusive: min,
    maxExclusive: max,
    ridPrefix: id,
    throughputFraction: 1,
    status: "online",
    parents,
    ownedArchivalPKRangeIds: [],
    lsn
  };
}

/**
 * Give a container `count` ranges (at its create). `owner` is the package's collection item.
 */
function layOut(owner, count) {
  const colData = owner.read();
  const bounds = [FULL_MIN, ...layoutBoundaries(colData, count), FULL_MAX];
  const ranges = [];
  for (let i = 0; i < count; i += 1) ranges.push(newRange(owner, colData, i, bounds[i], bounds[i + 1], [], 1));
  colData[STATE] = { version: 1, nextId: count, ranges, gone: {} };
  return colData[STATE];
}

/** A container's ranges, laid out as one range when it has none yet (created before). */
function rangesOf(owner) {
  const colData = owner.read();
  return colData[STATE] || layOut(owner, 1);
}

/** The live ranges of a container, in EPK order. */
function liveRanges(owner) {
  return rangesOf(owner).ranges;
}

/** The live range that holds an EPK. */
function rangeOfEpk(owner, epk) {
  const ranges = liveRanges(owner);
  return ranges.find(r => epk >= r.minInclusive && epk < r.maxExclusive) || ranges[ranges.length - 1];
}

/** The live ranges overlapping [min, max) (a feed range). */
function overlapping(owner, min, max) {
  return liveRanges(owner).filter(r => r.minInclusive < max && min < r.maxExclusive);
}

/** 410 / 1002 (PartitionKeyRangeGone), as the service answers a range that was split. */
function rangeGone(id, children) {
  const why = children
    ? `was split into ${children.join(", ")}`
    : "does not exist in this container";
  return new CosmosError(410, "Gone",
    `The partition key range '${id}' ${why} (PartitionKeyRangeGone): refresh the partition key ranges (pkranges) and retry on the ranges that replaced it.`,
    1002);
}

/** The live range of that id, or 410 / 1002. */
function liveRange(owner, id) {
  const state = rangesOf(owner);
  const wanted = String(id).split(",").pop(); // "<collection rid>,<range id>" as some clients send it
  const found = state.ranges.find(r => r.id === wanted);
  if (!found) throw rangeGone(wanted, state.gone[wanted]);
  return found;
}

/**
 * Split a live range at `cut` (an EPK strictly inside it): two children replace it, ids
 * `nextId` and `nextId + 1`, carrying its lineage. Returns the children.
 */
function splitAt(owner, rangeId, cut) {
  const state = rangesOf(owner);
  const colData = owner.read();
  const index = state.ranges.findIndex(r => r.id === String(rangeId));
  const parent = state.ranges[index];
  if (!(cut > parent.minInclusive && cut < parent.maxExclusive)) {
    throw badRequest(`Cannot split partition key range '${rangeId}' at '${cut}': not inside it.`);
  }
  state.version += 1;
  const parents = [...parent.parents, parent.id];
  const left = newRange(owner, colData, state.nextId, parent.minInclusive, cut, parents, state.version);
  const right = newRange(owner, colData, state.nextId + 1, cut, parent.maxExclusive, parents, state.version);
  state.nextId += 2;
  state.ranges.splice(index, 1, left, right);
  state.gone[parent.id] = [left.id, right.id];
  return [left, right];
}

/**
 * Where to cut a range: the median EPK of the documents in it (`epks`, sorted), so each child
 * holds about half of them and one partition key never spans two ranges; a range with fewer
 * than two partition keys is cut in the middle of the hash space it covers. Null: it cannot
 * be cut (one EPK wide).
 */
function cutPoint(owner, range, epks) {
  if (epks.length > 0) {
    let cut = epks[Math.floor(epks.length / 2)];
    if (cut === epks[0]) cut = epks.find(e => e > epks[0]);
    if (cut !== undefined && cut > range.minInclusive && cut < range.maxExclusive) return cut;
  }
  const [low, high] = hashSpace(owner.read());
  const min = range.minInclusive > low ? range.minInclusive : low;
  const max = range.maxExclusive < high ? range.maxExclusive : high;
  const mid = min < max ? midpoint(min, max) : null;
  if (mid !== null) return mid;
  // outside the hash's space (a range past it): cut the range itself
  return midpoint(range.minInclusive, range.maxExclusive === FULL_MAX ? "FF" : range.maxExclusive);
}

/** A range as served: the fraction of the throughput it gets is shared by the live ranges. */
function served(range, liveCount) {
  return { ...range, throughputFraction: 1 / liveCount };
}

function etagOf(colData, version) {
  return `"${colData._rid}.${version}"`;
}

/** The version an etag of this container names, or null (another container's, or not one). */
function versionOf(colData, etag) {
  const m = /^(.*)\.(\d+)$/.exec(unquote(etag));
  return m && m[1] === colData._rid ? parseInt(m[2], 10) : null;
}

/**
 * GET /dbs/{db}/colls/{coll}/pkranges: every live range, or (If-None-Match: the etag of an
 * earlier read) the ranges that appeared since, 304 when none did.
 */
function handlePartitionKeyRanges(req, res, owner) {
  const colData = owner.read();
  const state = rangesOf(owner);
  const etag = etagOf(colData, state.version);
  const since = header(req, "if-none-match");
  let ranges = state.ranges;
  if (since !== undefined && since !== "*") {
    const version = versionOf(colData, since);
    if (version !== null) ranges = ranges.filter(r => r.lsn > version);
  } else if (since === "*") ranges = [];
  if (ranges.length === 0 && since !== undefined) {
    send(req, res, 304, undefined, { etag, "x-ms-item-count": "0" });
    return;
  }
  const out = ranges.map(r => served(r, state.ranges.length));
  send(req, res, 200, { _rid: colData._rid, PartitionKeyRanges: out, _count: out.length },
    { etag, "x-ms-item-count": String(out.length) });
}

/** A container's body as clients see it: without the local ranges. */
function publicContainer(body) {
  if (!body || typeof body !== "object" || !(STATE in body)) return body;
  const { [STATE]: _omitted, ...rest } = body;
  return rest;
}

module.exports = {
  STATE,
  initialRangeCount,
  layOut,
  rangesOf,
  liveRanges,
  liveRange,
  rangeOfEpk,
  overlapping,
  splitAt,
  cutPoint,
  handlePartitionKeyRanges,
  publicContainer
};
