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
 *     a merge replaces adjacent ranges by one that names them all in `parents` (the SDKs
 *     read on in it, scoped by EPK to the range they had: FeedRangeCompositeContinuation's
 *     "merge" branch);
 *   - each range keeps its own log sequence number (LSN), as each physical partition of the
 *     service does: a write in a range advances that range's LSN only (lsn.js), and the
 *     session token and the change feed's etag a range answers are its own. A split's
 *     children carry on from the parent's LSN and a merge's range from the highest of its
 *     parents', so a continuation taken on a parent stays valid on what replaced it (the SDKs
 *     hand the parent's etag to each child; .NET's processor keeps it in the children's
 *     leases, or in EPK leases after a merge);
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
  colData[STATE] = { version: 1, nextId: count, ranges, gone: {}, lsns: {} };
  for (const r of ranges) colData[STATE].lsns[r.id] = 0;
  return colData[STATE];
}

/** A container's ranges, laid out as one range when it has none yet (created before). */
function rangesOf(owner) {
  const colData = owner.read();
  return colData[STATE] || layOut(owner, 1);
}

/**
 * The latest LSN of a range (live, or gone: its last), 0 before its first write. Ranges kept
 * before each had its own (one LSN for the account) start from that account's LSN: every
 * etag handed out before is at most that, and every document keeps the LSN it was written
 * with (persistence.js gives it, `startLsnsAt`).
 */
function rangeLsn(owner, id) {
  const state = rangesOf(owner);
  return (state.lsns && state.lsns[id]) || 0;
}

/** Set a range's latest LSN (lsn.js advances it, a rolled-back batch puts it back). */
function setRangeLsn(owner, id, lsn) {
  const state = rangesOf(owner);
  if (!state.lsns) state.lsns = {};
  state.lsns[id] = lsn;
}

/**
 * Give every range of a container kept without LSNs of their own (or without ranges: one is
 * laid out) the account's `lsn`, the one LSN the endpoint kept before.
 */
function startLsnsAt(owner, lsn) {
  const kept = owner.read()[STATE];
  if (kept && kept.lsns) return;
  const state = kept || layOut(owner, 1);
  state.lsns = {};
  for (const r of state.ranges) state.lsns[r.id] = lsn;
  for (const id of Object.keys(state.gone)) state.lsns[id] = lsn;
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
  let why = "does not exist in this container";
  if (children && children.length === 1) why = `was merged into ${children[0]}`;
  else if (children) why = `was split into ${children.join(", ")}`;
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
  // the children carry on from the parent's LSN, as a split partition's do
  const lsn = rangeLsn(owner, parent.id);
  setRangeLsn(owner, left.id, lsn);
  setRangeLsn(owner, right.id, lsn);
  return [left, right];
}

/**
 * Merge adjacent live ranges (by id, at least two, in any order) into one: a new id
 * (`nextId`), the EPK span they covered, every one of them and their ancestors in `parents`
 * (what the SDKs' routing maps drop when they read it), and the highest of their LSNs (so
 * that every etag handed out on them is at most its LSN). Their ids are gone for good
 * (410 / 1002 naming the merged range). Returns the merged range.
 */
function mergeRanges(owner, rangeIds) {
  const state = rangesOf(owner);
  const colData = owner.read();
  const wanted = new Set(rangeIds.map(String));
  const indexes = [];
  state.ranges.forEach((r, i) => { if (wanted.has(r.id)) indexes.push(i); });
  if (wanted.size < 2 || indexes.length !== wanted.size) {
    const unknown = [...wanted].filter(id => !state.ranges.some(r => r.id === id));
    throw badRequest(unknown.length
      ? `No live partition key range ${unknown.map(id => `'${id}'`).join(", ")} in container '${colData.id}' ` +
        `(live: ${state.ranges.map(r => r.id).join(", ")}).`
      : "A merge takes at least two partition key ranges.");
  }
  if (indexes[indexes.length - 1] - indexes[0] !== indexes.length - 1) {
    throw badRequest(`Partition key ranges ${[...wanted].join(", ")} of container '${colData.id}' are not ` +
      "adjacent: only ranges next to each other in the EPK space merge.");
  }
  const merged = state.ranges.slice(indexes[0], indexes[indexes.length - 1] + 1);
  state.version += 1;
  const parents = [];
  for (const r of merged) for (const id of [...r.parents, r.id]) if (!parents.includes(id)) parents.push(id);
  const range = newRange(owner, colData, state.nextId, merged[0].minInclusive,
    merged[merged.length - 1].maxExclusive, parents, state.version);
  state.nextId += 1;
  state.ranges.splice(indexes[0], merged.length, range);
  for (const r of merged) state.gone[r.id] = [range.id];
  setRangeLsn(owner, range.id, Math.max(...merged.map(r => rangeLsn(owner, r.id))));
  return range;
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
  rangeLsn,
  setRangeLsn,
  startLsnsAt,
  splitAt,
  mergeRanges,
  cutPoint,
  handlePartitionKeyRanges,
  publicContainer
};
