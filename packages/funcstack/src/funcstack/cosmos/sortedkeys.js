"use strict";
/*
 * Ordered keys for the local Cosmos DB endpoint's range indexes (pathindexes.js): the order
 * the service gives JSON values across types, and a sorted structure of (value, _rid) entries
 * that stays cheap to change and to seek at any size. Pure data structures, no I/O.
 *
 * The order, as Cosmos DB sorts ORDER BY results ("ORDER BY clause", learn.microsoft.com:
 * undefined, null, booleans, numbers, strings, then arrays and objects), is also the order of
 * the package's query engine (@zeit/cosmosdb-query's comparator), so a page the engine sorts
 * comes out in the order the index walked it:
 *   undefined < null < false < true < numbers < strings (UTF-16 code units) < arrays < objects;
 *   arrays compare by their text (as the engine's `<` does), all objects are equal.
 * `Bound`s stand below or above every value of one type, so a filter on one type is one range
 * of keys (`c.x > 5` is numbers above 5: strings and the rest are not greater than a number in
 * the service's comparisons, they are undefined).
 *
 * `SortedKeys` keeps entries (key, rid) sorted by key then rid in blocks of at most
 * BLOCK_MAX (a "sorted list" of sorted arrays): add, delete and seek cost a binary search and
 * one block's splice, whatever the size; walking from a position costs what is walked. A key is
 * one value, or an array of values for a composite index (each component in its own order).
 */

const RANK = { undefined: 0, null: 1, boolean: 2, number: 3, string: 4, array: 5, object: 6 };

/** A bound of one type: below (side -1) or above (side 1) every value of type rank `rank`. */
class Bound {
  constructor(rank, side) {
    this.rank = rank;
    this.side = side;
  }
}

const below = rank => new Bound(rank, -1);
const above = rank => new Bound(rank, 1);

function rankOf(v) {
  if (v === undefined) return 0;
  if (v === null) return 1;
  const t = typeof v;
  if (t === "boolean") return 2;
  if (t === "number") return 3;
  if (t === "string") return 4;
  if (v instanceof Bound) return v.rank;
  return Array.isArray(v) ? 5 : 6;
}

/** The service's order of two JSON values (-1, 0, 1), Bounds included. */
function compareValues(a, b) {
  if (a === b) return 0;
  const ra = rankOf(a);
  const rb = rankOf(b);
  if (ra !== rb) return ra < rb ? -1 : 1;
  const ba = a instanceof Bound;
  const bb = b instanceof Bound;
  if (ba || bb) {
    if (ba && bb) return a.side === b.side ? 0 : a.side;
    return ba ? a.side : -b.side;
  }
  switch (ra) {
    case 2:
    case 3:
    case 4:
      return a < b ? -1 : a > b ? 1 : 0;
    case 5: {
      const sa = String(a);
      const sb = String(b);
      return sa < sb ? -1 : sa > sb ? 1 : 0;
    }
    default:
      return 0; // undefined, null, objects
  }
}

/** The lowest and highest rid, for ranges of keys: every _rid lies strictly between them. */
const MIN_RID = "";
const MAX_RID = "\uffff";

function compareRids(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * A comparator of keys: one value (`directions` null), or arrays of values compared component
 * by component, each ascending (1) or descending (-1).
 */
function keyComparator(directions) {
  if (!directions) return compareValues;
  return (a, b) => {
    for (let i = 0; i < directions.length; i += 1) {
      const r = compareValues(a[i], b[i]);
      if (r !== 0) return r * directions[i];
    }
    return 0;
  };
}

const BLOCK_MAX = 256;
const BLOCK_HALF = BLOCK_MAX >>> 1;

class SortedKeys {
  constructor(directions = null) {
    this.compareKey = keyComparator(directions);
    this.blocks = []; // each {keys: [], rids: []}, sorted, non-empty
    this.size = 0;
  }

  compare(k1, r1, k2, r2) {
    const c = this.compareKey(k1, k2);
    return c !== 0 ? c : compareRids(r1, r2);
  }

  /** The first block whose last entry is >= (key, rid), or blocks.length. */
  blockAt(key, rid) {
    const { blocks } = this;
    let lo = 0;
    let hi = blocks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const b = blocks[mid];
      const last = b.keys.length - 1;
      if (this.compare(b.keys[last], b.rids[last], key, rid) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The first position in block `b` whose entry is >= (key, rid). */
  within(b, key, rid) {
    let lo = 0;
    let hi = b.keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.compare(b.keys[mid], b.rids[mid], key, rid) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Add (key, rid); false when it is there already. */
  add(key, rid) {
    const { blocks } = this;
    if (blocks.length === 0) {
      blocks.push({ keys: [key], rids: [rid] });
      this.size = 1;
      return true;
    }
    let bi = this.blockAt(key, rid);
    if (bi === blocks.length) bi -= 1; // above everything: the last block
    const b = blocks[bi];
    const i = this.within(b, key, rid);
    if (i < b.keys.length && b.rids[i] === rid && this.compareKey(b.keys[i], key) === 0) return false;
    b.keys.splice(i, 0, key);
    b.rids.splice(i, 0, rid);
    this.size += 1;
    if (b.keys.length > BLOCK_MAX) {
      blocks.splice(bi + 1, 0, { keys: b.keys.splice(BLOCK_HALF), rids: b.rids.splice(BLOCK_HALF) });
    }
    return true;
  }

  /** Delete (key, rid); false when it is not there. */
  delete(key, rid) {
    const { blocks } = this;
    const bi = this.blockAt(key, rid);
    if (bi === blocks.length) return false;
    const b = blocks[bi];
    const i = this.within(b, key, rid);
    if (i >= b.keys.length || b.rids[i] !== rid || this.compareKey(b.keys[i], key) !== 0) return false;
    b.keys.splice(i, 1);
    b.rids.splice(i, 1);
    this.size -= 1;
    if (b.keys.length === 0) blocks.splice(bi, 1);
    else if (b.keys.length < BLOCK_HALF >>> 2 && bi + 1 < blocks.length &&
      b.keys.length + blocks[bi + 1].keys.length <= BLOCK_MAX) {
      const next = blocks[bi + 1]; // merge small neighbours so blocks stay full enough
      b.keys.push(...next.keys);
      b.rids.push(...next.rids);
      blocks.splice(bi + 1, 1);
    }
    return true;
  }

  /**
   * `fn(key, rid)` for each entry from the position (key, rid) on, until it returns false:
   * forward, from the first entry >= (or > when `after`) it; backward (`reverse`), from the
   * last entry <= (or < when `after`) it. True when the entries ended first. Nothing is
   * allocated per entry; each call seeks again, so entries may change between calls.
   */
  visit(key, rid, { after = false, reverse = false }, fn) {
    const { blocks } = this;
    if (blocks.length === 0) return true;
    let bi = this.blockAt(key, rid);
    let i;
    if (bi === blocks.length) {
      bi = blocks.length - 1;
      i = blocks[bi].keys.length; // past the end
    } else {
      i = this.within(blocks[bi], key, rid);
    }
    const at = (b, j) => this.compare(blocks[b].keys[j], blocks[b].rids[j], key, rid);
    if (!reverse) {
      if (i < blocks[bi].keys.length && after && at(bi, i) === 0) i += 1;
      for (; bi < blocks.length; bi += 1, i = 0) {
        const b = blocks[bi];
        for (; i < b.keys.length; i += 1) if (fn(b.keys[i], b.rids[i]) === false) return false;
      }
      return true;
    }
    if (!(i < blocks[bi].keys.length && !after && at(bi, i) === 0)) i -= 1;
    while (bi >= 0) {
      const b = blocks[bi];
      if (i >= b.keys.length) i = b.keys.length - 1;
      for (; i >= 0; i -= 1) if (fn(b.keys[i], b.rids[i]) === false) return false;
      bi -= 1;
      if (bi >= 0) i = blocks[bi].keys.length - 1;
    }
    return true;
  }

  /**
   * Load entries already sorted: `order` (indexes into `keys` / `rids`, in this structure's
   * order); the structure must be empty. Equal neighbours are kept once. `await tick()` every
   * LOAD_STEP entries (a slice of the event loop's time).
   */
  async load(keys, rids, order, tick) {
    let block = null;
    let lastKey;
    let lastRid = null;
    for (let j = 0; j < order.length; j += 1) {
      const i = order[j];
      const key = keys[i];
      const rid = rids[i];
      if (lastRid !== null && rid === lastRid && this.compareKey(key, lastKey) === 0) continue;
      if (block === null || block.keys.length >= BLOCK_HALF) {
        block = { keys: [], rids: [] };
        this.blocks.push(block);
      }
      block.keys.push(key);
      block.rids.push(rid);
      this.size += 1;
      lastKey = key;
      lastRid = rid;
      if ((j & (LOAD_STEP - 1)) === LOAD_STEP - 1) await tick();
    }
  }

  /**
   * Up to `max` _rids from the position (key, rid) on, forward (see `visit`), without their
   * keys: `[rids, lastKey, lastRid]` (the last entry given, for the next call), or null at the end.
   */
  takeRids(key, rid, after, max) {
    const { blocks } = this;
    if (blocks.length === 0) return null;
    let bi = this.blockAt(key, rid);
    if (bi === blocks.length) return null;
    let i = this.within(blocks[bi], key, rid);
    const b0 = blocks[bi];
    if (after && i < b0.keys.length && this.compare(b0.keys[i], b0.rids[i], key, rid) === 0) i += 1;
    const out = [];
    let lastKey;
    let lastRid = null;
    while (bi < blocks.length && out.length < max) {
      const b = blocks[bi];
      for (; i < b.keys.length && out.length < max; i += 1) out.push(b.rids[i]);
      if (i > 0 && out.length) {
        lastKey = b.keys[i - 1];
        lastRid = b.rids[i - 1];
      }
      if (i >= b.keys.length) {
        bi += 1;
        i = 0;
      }
    }
    return out.length ? [out, lastKey, lastRid] : null;
  }

  /** The number of entries from (lo, loRid) (included) to (hi, hiRid) (excluded). */
  count(lo, loRid, hi, hiRid) {
    const { blocks } = this;
    if (blocks.length === 0) return 0;
    const position = (key, rid) => {
      const bi = this.blockAt(key, rid);
      if (bi === blocks.length) return [bi, 0];
      return [bi, this.within(blocks[bi], key, rid)];
    };
    const [b1, i1] = position(lo, loRid);
    const [b2, i2] = position(hi, hiRid);
    if (b1 > b2 || (b1 === b2 && i1 >= i2)) return 0;
    if (b1 === b2) return i2 - i1;
    let n = blocks[b1].keys.length - i1 + i2;
    for (let b = b1 + 1; b < b2; b += 1) n += blocks[b].keys.length;
    return n;
  }
}

/** Entries loaded between two looks at the clock. */
const LOAD_STEP = 4096;
/** Entries sorted a run at a time before they are merged (well within a slice each). */
const RUN = 512;
/** Entries merged between two looks at the clock (`tick` yields once a slice is used up). */
const MERGE_STEP = 512;

/**
 * The order of n entries by `cmp(i, j)` (of their indexes), as a Uint32Array: a merge sort
 * whose runs and merges are cut into steps, `await tick()` between them (a slice of the
 * event loop's time), so that sorting a million entries never holds the endpoint.
 */
async function sortInSlices(n, cmp, tick) {
  let a = new Uint32Array(n);
  for (let i = 0; i < n; i += 1) a[i] = i;
  for (let s = 0; s < n; s += RUN) {
    a.subarray(s, Math.min(s + RUN, n)).sort(cmp);
    await tick();
  }
  let b = new Uint32Array(n);
  for (let width = RUN; width < n; width *= 2) {
    for (let lo = 0; lo < n; lo += 2 * width) {
      const mid = Math.min(lo + width, n);
      const hi = Math.min(lo + 2 * width, n);
      let i = lo;
      let j = mid;
      let k = lo;
      while (k < hi) {
        const stop = Math.min(hi, k + MERGE_STEP);
        for (; k < stop; k += 1) {
          if (i < mid && (j >= hi || cmp(a[i], a[j]) <= 0)) {
            b[k] = a[i];
            i += 1;
          } else {
            b[k] = a[j];
            j += 1;
          }
        }
        await tick();
      }
    }
    [a, b] = [b, a];
  }
  return a;
}

module.exports = {
  SortedKeys,
  sortInSlices,
  Bound,
  below,
  above,
  rankOf,
  compareValues,
  keyComparator,
  MIN_RID,
  MAX_RID,
  RANK
};
