"use strict";
/*
 * Indexes of a container's documents for the local Cosmos DB endpoint (store.js), so that the
 * paths a running app takes all the time cost what they touch, not what the container holds:
 *
 *   - the LSN index, one per physical partition (partition key range: each has its own LSNs,
 *     lsn.js): the range's writes in LSN order, (lsn, _rid) per written version. The service
 *     serves a partition's change feed from its log by position (the continuation is an LSN,
 *     Microsoft.Azure.Cosmos's ChangeFeedStartFrom / the etag of a page): a read from a
 *     continuation looks the position up (binary search) and walks forward over what was
 *     written since, never over the whole container. An entry is live while the document
 *     with that _rid still carries that LSN; the others (older versions, deleted documents)
 *     are skipped and dropped once they outnumber the live ones (amortised, in one pass). A
 *     split or a merge builds them again for the ranges that replaced the old (`forget`):
 *     each document lands in its range's index with the LSN it was written with;
 *   - the expiry index: a min-heap of (expiry time, _rid, lsn) of every version with a time to
 *     live, which the TTL sweep (ttl.js) pops instead of reading every document every second,
 *     as the service's background TTL deletion works through what has expired;
 *   - the partition index: the _rids of each value of the partition key's first component, so
 *     a request scoped to one partition key reads that partition's documents, as the service
 *     serves it from one logical partition.
 *
 * One `ContainerIndex` per container (the package's collection object), built from the
 * container's documents when first asked for (after a restart, or a legacy load) and kept up
 * to date by store.js, which reports each written version. Pure data structures: no I/O, no
 * knowledge of the store beyond the `versions` it is given (an item's LSN and expiry time).
 */

/** First position whose value is > `value` in a non-decreasing array. */
function upperBound(values, value) {
  let lo = 0;
  let hi = values.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (values[mid] <= value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** First position whose value is >= `value` in a non-decreasing array. */
function lowerBound(values, value) {
  let lo = 0;
  let hi = values.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (values[mid] < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Entries beyond this many more than the live documents are dropped in one pass. */
const SLACK = 1024;

class LsnIndex {
  constructor() {
    this.lsns = [];
    this.rids = [];
    this.floor = 0; // entries after the last build or compaction: all live then
  }

  get size() {
    return this.lsns.length;
  }

  /** A version written at `lsn` (the newest, or an older one put back by a rolled-back batch). */
  add(lsn, rid) {
    const { lsns, rids } = this;
    const n = lsns.length;
    if (n === 0 || lsns[n - 1] < lsn) {
      lsns.push(lsn);
      rids.push(rid);
      return;
    }
    // same LSN (one batch) or an older one: keep the order, and one entry per version
    let i = lowerBound(lsns, lsn);
    for (; i < n && lsns[i] === lsn; i += 1) if (rids[i] === rid) return;
    if (i === n) {
      lsns.push(lsn);
      rids.push(rid);
    } else {
      lsns.splice(i, 0, lsn);
      rids.splice(i, 0, rid);
    }
  }

  /**
   * What `live(rid, lsn)` returns for each entry written after `sinceLsn`, in LSN order (one
   * transaction's documents in the order they were written), each once (an entry is one
   * version, and only the version a document holds now is live), skipping the null ones.
   */
  *since(sinceLsn, live) {
    const { lsns, rids } = this;
    for (let i = upperBound(lsns, sinceLsn); i < lsns.length; i += 1) {
      const doc = live(rids[i], lsns[i]);
      if (doc) yield doc;
    }
  }

  /** Drop what is no longer live once the entries are twice what was live at the last pass. */
  compact(live) {
    if (this.lsns.length <= 2 * this.floor + SLACK) return;
    const lsns = [];
    const rids = [];
    for (let i = 0; i < this.lsns.length; i += 1) {
      if (!live(this.rids[i], this.lsns[i])) continue;
      lsns.push(this.lsns[i]);
      rids.push(this.rids[i]);
    }
    this.lsns = lsns;
    this.rids = rids;
    this.floor = lsns.length;
  }
}

/** A binary min-heap of (expiry time in ms, _rid, lsn). */
class ExpiryHeap {
  constructor() {
    this.at = [];
    this.rids = [];
    this.lsns = [];
  }

  get size() {
    return this.at.length;
  }

  peek() {
    return this.at.length ? this.at[0] : Infinity;
  }

  push(at, rid, lsn) {
    this.at.push(at);
    this.rids.push(rid);
    this.lsns.push(lsn);
    this.up(this.at.length - 1);
  }

  /** The earliest entry, removed: [at, rid, lsn]. */
  pop() {
    const top = [this.at[0], this.rids[0], this.lsns[0]];
    const last = this.at.length - 1;
    this.swap(0, last);
    this.at.pop();
    this.rids.pop();
    this.lsns.pop();
    if (this.at.length) this.down(0);
    return top;
  }

  /**
   * The distinct _rids of the entries due by `now` (at <= now) that `accept(rid, lsn)`
   * accepts, without popping them: the due entries are the top of the heap (an entry's
   * children are due no sooner), so the cost is what is due.
   */
  dueBy(now, accept) {
    const found = new Set();
    const stack = this.at.length && this.at[0] <= now ? [0] : [];
    while (stack.length) {
      const i = stack.pop();
      if (accept(this.rids[i], this.lsns[i])) found.add(this.rids[i]);
      for (const c of [2 * i + 1, 2 * i + 2]) if (c < this.at.length && this.at[c] <= now) stack.push(c);
    }
    return found;
  }

  /** Keep only the entries `keep(rid, lsn)` accepts, as one heap again (O(n)). */
  filter(keep) {
    const at = [];
    const rids = [];
    const lsns = [];
    for (let i = 0; i < this.at.length; i += 1) {
      if (!keep(this.rids[i], this.lsns[i])) continue;
      at.push(this.at[i]);
      rids.push(this.rids[i]);
      lsns.push(this.lsns[i]);
    }
    this.at = at;
    this.rids = rids;
    this.lsns = lsns;
    for (let i = (at.length >>> 1) - 1; i >= 0; i -= 1) this.down(i);
  }

  swap(i, j) {
    const { at, rids, lsns } = this;
    [at[i], at[j]] = [at[j], at[i]];
    [rids[i], rids[j]] = [rids[j], rids[i]];
    [lsns[i], lsns[j]] = [lsns[j], lsns[i]];
  }

  up(i) {
    while (i > 0) {
      const parent = (i - 1) >>> 1;
      if (this.at[parent] <= this.at[i]) return;
      this.swap(i, parent);
      i = parent;
    }
  }

  down(i) {
    const n = this.at.length;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < n && this.at[l] < this.at[m]) m = l;
      if (r < n && this.at[r] < this.at[m]) m = r;
      if (m === i) return;
      this.swap(i, m);
      i = m;
    }
  }
}

class ContainerIndex {
  /**
   * `docs` is the package's documents of the container (its `_data` map: _rid -> item);
   * `versions` = {lsn(item), range(item), expiresAt(item), partition(item)}: the LSN of the
   * version an item holds, the id of the range (physical partition) holding it, when it
   * expires (ms, or null) and its partition index key, read without parsing a document kept
   * across a restart.
   */
  constructor(docs, versions, defaultTtl) {
    this.docs = docs;
    this.versions = versions;
    this.byRange = new Map(); // range id -> LsnIndex
    this.expiry = new ExpiryHeap();
    // key -> _rid, or a Set of _rids when more than one; built when first asked for (a
    // restart does not pay for it before the first query scoped to a partition)
    this.partitions = null;
    this.ttlBuiltFor = defaultTtl;
    /** The item of `rid` when it still holds the version written at `lsn`, or null. */
    this.live = (rid, lsn) => {
      const item = docs._data.get(rid);
      return item && versions.lsn(item) === lsn ? item : null;
    };
    const groups = new Map(); // range id -> [rids, lsns]
    for (const [rid, item] of docs._data) {
      const range = versions.range(item);
      let group = groups.get(range);
      if (!group) groups.set(range, (group = [[], []]));
      group[0].push(rid);
      group[1].push(versions.lsn(item));
    }
    for (const [range, [rids, lsns]] of groups) {
      // stored in the order of their last write: nearly sorted already
      const order = rids.map((_, i) => i).sort((a, b) => lsns[a] - lsns[b]);
      const index = this.rangeIndex(range);
      for (const i of order) index.add(lsns[i], rids[i]);
      index.floor = index.size;
    }
    this.rebuildExpiry(defaultTtl);
  }

  /** The LSN index of a range (empty until its first write). */
  rangeIndex(rangeId) {
    let index = this.byRange.get(rangeId);
    if (!index) this.byRange.set(rangeId, (index = new LsnIndex()));
    return index;
  }

  enter(key, rid) {
    if (this.partitions === null) return;
    const there = this.partitions.get(key);
    if (there === undefined) this.partitions.set(key, rid);
    else if (typeof there === "string") {
      if (there !== rid) this.partitions.set(key, new Set([there, rid]));
    } else there.add(rid);
  }

  /** A document left its partition (deleted). */
  removed(key, rid) {
    if (this.partitions === null) return;
    const there = this.partitions.get(key);
    if (there === rid) this.partitions.delete(key);
    else if (there !== undefined && typeof there !== "string") {
      there.delete(rid);
      if (there.size === 0) this.partitions.delete(key);
    }
  }

  /** The _rids in the partition index under `key` (may include some no longer there). */
  inPartition(key) {
    if (this.partitions === null) {
      this.partitions = new Map();
      for (const [rid, item] of this.docs._data) this.enter(this.versions.partition(item), rid);
    }
    const there = this.partitions.get(key);
    if (there === undefined) return [];
    return typeof there === "string" ? [there] : [...there];
  }

  /** Every version with a time to live, again (the container's defaultTtl changed). */
  rebuildExpiry(defaultTtl) {
    this.expiry = new ExpiryHeap();
    this.ttlBuiltFor = defaultTtl;
    for (const [rid, item] of this.docs._data) {
      const at = this.versions.expiresAt(item);
      if (at !== null) this.expiry.push(at, rid, this.versions.lsn(item));
    }
  }

  /**
   * How many documents hold a version due to expire by `now` that `expired(item)` confirms
   * (the sweep has not deleted them yet): the expiry index's due entries, not the container.
   */
  expiredBy(now, expired) {
    return this.expiry.dueBy(now, (rid, lsn) => {
      const item = this.live(rid, lsn);
      return Boolean(item) && expired(item);
    }).size;
  }

  /** The items of the live versions written in the range `rangeId` after `sinceLsn`, in LSN order. */
  changedSince(rangeId, sinceLsn) {
    return this.rangeIndex(rangeId).since(sinceLsn, this.live);
  }

  /**
   * A version was written (or put back) in the range `rangeId`; `at` is its expiry time or
   * null, `key` its partition's.
   */
  written(lsn, rid, at, key, rangeId) {
    const index = this.rangeIndex(rangeId);
    index.add(lsn, rid);
    this.enter(key, rid);
    index.compact(this.live);
    if (at !== null) {
      this.expiry.push(at, rid, lsn);
      if (this.expiry.size > 2 * this.docs._data.size + SLACK) this.expiry.filter(this.live);
    }
  }
}

const byCollection = new WeakMap();

/**
 * The index of a container (the package's collection object), built on first use.
 * `versions` as for ContainerIndex.
 */
function indexOf(collection, versions) {
  let index = byCollection.get(collection);
  const defaultTtl = (collection.read() || {}).defaultTtl;
  if (!index) {
    index = new ContainerIndex(collection.documents, versions, defaultTtl);
    byCollection.set(collection, index);
  } else if (index.ttlBuiltFor !== defaultTtl) {
    index.versions = versions;
    index.rebuildExpiry(defaultTtl);
  }
  return index;
}

/** Build a container's indexes again at their next use (its ranges were split or merged). */
function forget(collection) {
  byCollection.delete(collection);
}

module.exports = { indexOf, forget, LsnIndex, ExpiryHeap };
