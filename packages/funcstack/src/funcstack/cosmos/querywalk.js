"use strict";
/*
 * Which documents a query reads and in which order (queryrun.js runs the query on them): the
 * order of its rows and a position in it, the clock that slices its time, the sources (an
 * index's range, a list of _rids, every document) and the plan that picks the one that selects
 * the fewest. See queryrun.js for the whole.
 */

const { pathIndexes, valueAt, rawValueAt, UNKNOWN, pathText, SLICE_MS } = require("./pathindexes");
const { compareValues, sortInSlices, MIN_RID, MAX_RID, below, above } = require("./sortedkeys");
const { ranges } = require("./queryindex");
const { CosmosError } = require("./responses");

/**
 * Up to this many documents a filter's selection is sorted (into _rid or the ORDER BY's order,
 * in slices); a larger one is read through the primary or the ORDER BY's index.
 */
const SORT_SELECTED_MAX = 20000;

// ---------------------------------------------------------------- order and positions

/**
 * The order of a query's rows: null (by _rid), or {items: [{segs, desc}], dir}: by the values
 * at each path, then _rid in the direction of the first item. Positions are {vals, rid}.
 */
function compareAt(order, a, b) {
  if (order) {
    for (let i = 0; i < order.items.length; i += 1) {
      const c = compareValues(a.vals[i], b.vals[i]);
      if (c !== 0) return order.items[i].desc ? -c : c;
    }
  }
  const r = a.rid < b.rid ? -1 : a.rid > b.rid ? 1 : 0;
  return order && order.dir < 0 ? -r : r;
}

/** A position in a continuation: undefined (no value) is [], a value [value]. */
const encodeVals = vals => vals.map(v => (v === undefined ? [] : [v]));
const decodeVals = vals => vals.map(v => (Array.isArray(v) && v.length ? v[0] : undefined));

// ---------------------------------------------------------------- the clock

/** Time slices and the page's budget: `tick()` yields once a slice is used up. */
class Clock {
  constructor(budget) {
    this.started = process.hrtime.bigint();
    this.slice = this.started;
    this.budget = budget;
    this.indexNs = 0n;
  }

  elapsedMs() {
    return Number(process.hrtime.bigint() - this.started) / 1e6;
  }

  over() {
    return this.budget !== null && this.elapsedMs() >= this.budget;
  }

  /** Whether the current slice is used up. */
  sliceOver() {
    return Number(process.hrtime.bigint() - this.slice) / 1e6 >= SLICE_MS;
  }

  async tick() {
    if (!this.sliceOver()) return;
    await new Promise(resolve => setImmediate(resolve));
    this.slice = process.hrtime.bigint();
  }

  /** `fn()` timed as index work (the metrics' indexLookupTimeInMs). */
  index(fn) {
    const t = process.hrtime.bigint();
    try {
      return fn();
    } finally {
      this.indexNs += process.hrtime.bigint() - t;
    }
  }
}

// ---------------------------------------------------------------- sources

/**
 * A walk over an index's entries in its order (or reversed) within [lo, hi), from `from`
 * ([key, rid], included unless `after`) on: `next(max)` gives the next _rids, `last()` the
 * [key, rid] of the last one given.
 */
function indexWalk(keys, lo, hi, reverse, from, after = false) {
  let at = from || (reverse ? hi : lo);
  let skip = from ? after : reverse; // hi is excluded
  let done = false;
  let last = null;
  return {
    next(max) {
      if (done) return [];
      const out = [];
      let lastKey;
      let lastRid = null;
      const ended = keys.visit(at[0], at[1], { after: skip, reverse }, (key, rid) => {
        if (out.length >= max) return false;
        const inside = reverse
          ? keys.compare(key, rid, lo[0], lo[1]) >= 0
          : keys.compare(key, rid, hi[0], hi[1]) < 0;
        if (!inside) {
          done = true;
          return false;
        }
        out.push(rid);
        lastKey = key;
        lastRid = rid;
        return true;
      });
      if (lastRid !== null) {
        at = [lastKey, lastRid];
        last = at;
      }
      skip = true;
      if (ended) done = true;
      return out;
    },
    last: () => last
  };
}

/** A walk over a list in order from `start`: `next(max)` gives _rids (`ridOf`), `last()` the last item. */
function listWalk(list, start, ridOf) {
  let i = start;
  return {
    next(max) {
      const out = list.slice(i, i + max);
      i += out.length;
      return out.map(ridOf);
    },
    last: () => (i > start ? list[i - 1] : null)
  };
}

/** The first index of `sorted` whose element is >= (or > when `after`) `target` by `cmp`. */
function bound(sorted, target, cmp, after) {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const c = cmp(sorted[mid], target);
    if (c < 0 || (after && c === 0)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const compareRid = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Whether a stored document (store.js StoredDocument) is in what a request is scoped to
 * (partitions.js's scope, and a span), told without parsing it; null when nothing is scoped.
 */
function scopeTest(store, scope, span) {
  const { itemInScope, itemEpk } = require("./partitions"); // eslint-disable-line global-require
  const colData = store.colData;
  const scoped = scope && (scope.pk !== null || scope.range !== null || scope.epk !== null);
  if (!scoped && !span) return null;
  return item => {
    if (scoped && !itemInScope(colData, item, scope)) return false;
    if (span) {
      const e = itemEpk(colData, item);
      return e >= span[0] && e < span[1];
    }
    return true;
  };
}

/** A stored document's position in an order: its values read from its text where they can be. */
function positionOfItem(order, item) {
  if (!order) return { vals: [], rid: item.rid };
  const text = item.text();
  let doc = null;
  const vals = order.items.map(o => {
    if (doc === null) {
      const v = rawValueAt(text, o.segs);
      if (v !== UNKNOWN) return v;
      doc = item.read();
    }
    return valueAt(doc, o.segs);
  });
  return { vals, rid: item.rid };
}

// ---------------------------------------------------------------- planning

/** The index's build has not finished within the page's budget (the page answers empty). */
class NotBuilt extends Error {}

/**
 * Wait for an index a query reads (built when first asked for: pathindexes.js); past the
 * page's budget, when a page may be partial, NotBuilt.
 */
async function built(indexes, index, clock) {
  if (index.ready) return index;
  const t = process.hrtime.bigint();
  const building = indexes.ready(index);
  if (clock.budget !== null) {
    const left = Math.max(0, clock.budget - clock.elapsedMs());
    let timer;
    const late = new Promise(resolve => {
      timer = setTimeout(resolve, left);
    });
    const first = await Promise.race([building, late]);
    clearTimeout(timer);
    clock.indexNs += process.hrtime.bigint() - t;
    if (first !== index) throw new NotBuilt(index.name);
    return index;
  }
  await building;
  clock.indexNs += process.hrtime.bigint() - t;
  return index;
}

/**
 * The candidates of a WHERE term: {sets: [{index, ranges}], exact, estimate, specs} from an
 * index that serves it, {all} when it selects nothing out, null when no index serves it
 * (`missed` gets the paths the policy excludes: the potential indexes).
 */
async function candidates(t, ctx) {
  const { policy, paths, params, clock, missed } = ctx;
  if (t.kind === "all") return { all: true, exact: true };
  if (t.kind === "scan") return null;
  if (t.kind === "term") {
    const segs = t.elements ? [...t.segs, 0] : t.segs;
    const spec = `${pathText(t.segs)}${t.elements ? "/[]" : ""}/?`;
    if (!policy.indexes(segs)) {
      missed.push(spec);
      return null;
    }
    const index = await built(paths, t.elements ? paths.elements(t.segs) : paths.path(t.segs), clock);
    const { list, exact } = ranges(t, params);
    const estimate = clock.index(() => list.reduce((n, r) => n + index.keys.count(r.lo[0], r.lo[1], r.hi[0], r.hi[1]), 0));
    return { sets: [{ index, ranges: list }], exact, estimate, specs: [spec] };
  }
  const found = [];
  for (const child of t.terms) found.push(await candidates(child, ctx));
  if (t.kind === "and") {
    intersectSamePaths(found);
    const usable = found.filter(c => c && !c.all);
    if (usable.length === 0) return found.every(c => c) ? { all: true, exact: true } : null;
    const best = usable.reduce((a, b) => (b.estimate < a.estimate ? b : a));
    return { ...best, exact: best.exact && found.every(c => c === best || (c && c.all)) };
  }
  // OR: every branch from an index, their union
  if (found.some(c => !c)) return null;
  if (found.some(c => c.all)) return { all: true, exact: found.every(c => c.exact) };
  return {
    sets: found.flatMap(c => c.sets),
    exact: found.every(c => c.exact),
    estimate: found.reduce((n, c) => n + c.estimate, 0),
    specs: found.flatMap(c => c.specs)
  };
}

/**
 * Under an AND, two single ranges on one index are one range, their intersection (`c.n > 1
 * AND c.n <= 5`): the first candidate gets it, the second selects nothing out any more.
 */
function intersectSamePaths(found) {
  for (let i = 0; i < found.length; i += 1) {
    const a = found[i];
    if (!a || a.all || a.sets.length !== 1 || a.sets[0].ranges.length !== 1) continue;
    for (let j = i + 1; j < found.length; j += 1) {
      const b = found[j];
      if (!b || b.all || b.sets.length !== 1 || b.sets[0].ranges.length !== 1 || b.sets[0].index !== a.sets[0].index) continue;
      const { keys } = a.sets[0].index;
      const [ra] = a.sets[0].ranges;
      const [rb] = b.sets[0].ranges;
      const lo = keys.compare(ra.lo[0], ra.lo[1], rb.lo[0], rb.lo[1]) >= 0 ? ra.lo : rb.lo;
      const hi = keys.compare(ra.hi[0], ra.hi[1], rb.hi[0], rb.hi[1]) <= 0 ? ra.hi : rb.hi;
      const empty = keys.compare(lo[0], lo[1], hi[0], hi[1]) >= 0;
      const r = { lo, hi };
      found[i] = {
        sets: [{ index: a.sets[0].index, ranges: empty ? [] : [r] }],
        exact: a.exact && b.exact,
        estimate: empty ? 0 : keys.count(lo[0], lo[1], hi[0], hi[1]),
        specs: a.specs
      };
      found[j] = { all: true, exact: true };
    }
  }
}

const refused = message => new CosmosError(400, "BadRequest", message);

/** The order of a query's rows and the index serving its ORDER BY (refused as the service does). */
function orderOf(analysis, policy, paths) {
  if (!analysis.orderBy) return { order: null };
  const items = analysis.orderBy;
  const order = { items, dir: items[0].desc ? -1 : 1 };
  if (items.some(o => !o.segs)) {
    throw refused("Unsupported ORDER BY clause. ORDER BY item expression could not be mapped to a document path.");
  }
  if (items.length === 1) {
    if (!policy.indexes(items[0].segs)) {
      throw refused("The index path corresponding to the specified order-by item is excluded.");
    }
    return { order, index: paths.path(items[0].segs), spec: `${pathText(items[0].segs)}/?` };
  }
  const composite = policy.composite(items);
  if (!composite) {
    throw refused("The order by query does not have a corresponding composite index that it can be served from.");
  }
  const [declared] = composite;
  // kept with its first path ascending: walked forward for an ascending first item
  const normal = declared[0].desc ? declared.map(e => ({ ...e, desc: !e.desc })) : declared;
  return {
    order,
    index: paths.composite(normal),
    composite: declared.map(e => `${pathText(e.segs)} ${e.desc ? "DESC" : "ASC"}`)
  };
}

function isPoint(r) {
  return compareValues(r.lo[0], r.hi[0]) === 0;
}

/**
 * The plan of a query on one container for a request: {walk(from) -> walker, order, exact,
 * estimate (of the documents it walks), utilized, compositeUsed, potential}. A walker's `last()` and `from` are positions in the
 * order: {vals, rid, after}.
 */
async function plan(store, p, options, clock) {
  const paths = pathIndexes(store.collection);
  const policy = paths.currentPolicy();
  const { analysis } = p;
  const missed = [];
  const { order, index: orderIndex, spec: orderSpec, composite } = orderOf(analysis, policy, paths);
  const filter = await candidates(analysis.where, { policy, paths, params: options.params, clock, missed });
  const utilized = [];
  const compositeUsed = [];
  const scope = options.scope;
  const colData = store.colData;
  const pkPaths = ((colData.partitionKey || {}).paths) || [];
  // the partition key's documents, when the request names one (its partition index)
  let partition = null;
  if (scope && scope.pk !== null) {
    const rids = clock.index(() => store.partitionRids(scope.pk));
    partition = { rids, estimate: rids.length };
  }
  const useFilter = Boolean(filter && !filter.all && (!partition || filter.estimate < partition.estimate));
  if (useFilter) utilized.push(...filter.specs);
  if (partition && !useFilter) utilized.push(`${pkPaths[0] || "/id"}/?`);
  const exact = Boolean(filter && (filter.all || (useFilter && filter.exact)));
  const estimate = useFilter ? filter.estimate : partition ? partition.estimate : store.docs._data.size;

  // the _rids a filter or a partition selects (in no order yet)
  const selected = async () => {
    if (!useFilter) return partition.rids.slice();
    const seen = filter.sets.length > 1 || filter.sets[0].ranges.length > 1 ? new Set() : null;
    const out = [];
    for (const { index, ranges: list } of filter.sets) {
      for (const r of list) {
        const walk = indexWalk(index.keys, r.lo, r.hi, false, null);
        for (;;) {
          const rids = clock.index(() => walk.next(1024));
          for (const rid of rids) {
            if (seen) {
              if (seen.has(rid)) continue;
              seen.add(rid);
            }
            out.push(rid);
          }
          if (rids.length < 1024) break;
          await clock.tick();
        }
      }
    }
    return out;
  };
  const ridPosition = entry => (entry ? { vals: [], rid: entry[1] } : null);

  let walk;
  if (!order) {
    const single = useFilter && filter.sets.length === 1 && filter.sets[0].ranges.length === 1 &&
      isPoint(filter.sets[0].ranges[0]);
    if (single) {
      // one value of one index: its entries are in _rid order
      const { index, ranges: [r] } = filter.sets[0];
      walk = async from => {
        const w = indexWalk(index.keys, r.lo, r.hi, false, from ? [r.lo[0], from.rid] : null, from && from.after);
        return { next: w.next, last: () => ridPosition(w.last()) };
      };
    } else if ((useFilter && estimate <= SORT_SELECTED_MAX) || (partition && !useFilter)) {
      walk = async from => {
        const found = await selected();
        const order = await sortInSlices(found.length, (i, j) => compareRid(found[i], found[j]), () => clock.tick());
        const rids = Array.from(order, i => found[i]);
        const w = listWalk(rids, from ? bound(rids, from.rid, compareRid, from.after) : 0, rid => rid);
        return { next: w.next, last: () => (w.last() === null ? null : { vals: [], rid: w.last() }) };
      };
    } else {
      const primary = await built(paths, paths.primary(), clock);
      walk = async from => {
        const w = indexWalk(primary.keys, [null, MIN_RID], [null, MAX_RID], false,
          from ? [null, from.rid] : null, from && from.after);
        return { next: w.next, last: () => ridPosition(w.last()) };
      };
    }
  } else if (!((useFilter || partition) && estimate <= SORT_SELECTED_MAX)) {
    // the ORDER BY's index, walked in its order
    const index = await built(paths, orderIndex, clock);
    if (composite) compositeUsed.push(composite);
    else utilized.push(orderSpec);
    const reverse = order.dir < 0;
    const lowest = composite ? order.items.map(() => below(0)) : below(0);
    const highest = composite ? order.items.map(() => above(6)) : above(6);
    walk = async from => {
      const w = indexWalk(index.keys, [lowest, MIN_RID], [highest, MAX_RID], reverse,
        from ? [composite ? from.vals : from.vals[0], from.rid] : null, from && from.after);
      return {
        next: w.next,
        last: () => {
          const e = w.last();
          return e ? { vals: composite ? e[0] : [e[0]], rid: e[1] } : null;
        }
      };
    };
  } else {
    // the few documents a filter (or a partition) selects, sorted in the ORDER BY's order
    if (composite) compositeUsed.push(composite);
    else utilized.push(orderSpec);
    walk = async from => {
      const rids = await selected();
      const keyed = [];
      for (const rid of rids) {
        const item = store.docs._data.get(rid);
        if (item) keyed.push(positionOfItem(order, item));
        if ((keyed.length & 1023) === 0) await clock.tick();
      }
      const sorted = Array.from(
        await sortInSlices(keyed.length, (i, j) => compareAt(order, keyed[i], keyed[j]), () => clock.tick()),
        i => keyed[i]);
      const start = from ? bound(sorted, from, (a, b) => compareAt(order, a, b), from.after) : 0;
      return listWalk(sorted, start, k => k.rid);
    };
  }
  return { walk, order, exact, estimate, utilized, compositeUsed, potential: [...new Set(missed)] };
}

module.exports = {
  encodeVals,
  decodeVals,
  Clock,
  scopeTest,
  NotBuilt,
  built,
  refused,
  orderOf,
  plan
};
