"use strict";
/*
 * How the local Cosmos DB endpoint runs a query (query.js answers the request): from the
 * container's indexes, a slice at a time, as the service runs one against a partition.
 *
 *   - Which documents are read: the index that selects the fewest (queryindex.js finds what
 *     the WHERE and ORDER BY can take from the indexes the policy declares, pathindexes.js
 *     holds them), the partition key's documents when the request names one, or every
 *     document in order when nothing serves (a scan, reported as the service reports an index
 *     miss: the query metrics' documents retrieved, and the potential indexes of
 *     x-ms-cosmos-index-utilization). The engine of the package (@zeit/cosmosdb-query, with
 *     the service's semantics: sqlsemantics.js) evaluates the whole query on each document
 *     read; the index never decides what is answered.
 *   - In which order: a query without ORDER BY answers in _rid order (as the engine sorts);
 *     one with ORDER BY walks its range or composite index (or sorts the few documents a
 *     filter selects), the documents without a value first, ties by _rid in the direction of
 *     the first item. An ORDER BY the index policy cannot serve is refused as the service
 *     refuses it (400: an excluded path; several paths without their composite index).
 *   - Pages: each answer ends at the page size (or past 4 MB without one) or when its time
 *     budget (budgetMs, 1 s) runs out, with a continuation that names the next document's
 *     place in that order, so a page resumes where the last one stopped instead of walking
 *     again what it answered (the service answers a partial page with a continuation when a
 *     query's budget runs out: "Pagination in Azure Cosmos DB", learn.microsoft.com). An
 *     empty page with a continuation is an answer too; the SDKs ask for the next.
 *   - Aggregates (`SELECT VALUE COUNT(1) ...`, the plan's per-range `[{"item": AGG(x)}]`)
 *     are combined from the slices; a COUNT whose filter the index answers exactly counts index
 *     entries and reads no document (retrievedDocumentCount 0, as the service's).
 *   - Never stall: between slices of SLICE_MS the query yields to the event loop, so point
 *     reads, writes and change feed polls of other clients are answered meanwhile.
 *
 * The engine is given at most CHUNK documents at once: its FROM builds its rows by spreading an
 * array into a new one per document, quadratic in what it is given at once.
 */

const { pathIndexes, valueAt, pathText, SLICE_MS } = require("./pathindexes");
const { compareValues, sortInSlices, MIN_RID, MAX_RID, below, above } = require("./sortedkeys");
const { analyze, ranges } = require("./queryindex");
const { withMarkers, serviceSemantics, FUNCTIONS } = require("./sqlsemantics");
const { queryEngine } = require("./sqlparser");
const { isExpired, itemExpired } = require("./store");
const { CosmosError, badRequest } = require("./responses");

/** A page is answered once it has run this long (the rest follows with the continuation). */
const BUDGET_DEFAULT_MS = 1000;
let budgetMs = BUDGET_DEFAULT_MS;
/** Documents given to the engine at once (its FROM is quadratic in them). */
const CHUNK = 32;
/**
 * Up to this many documents a filter's selection is sorted (into _rid or the ORDER BY's order,
 * in slices); a larger one is read through the primary or the ORDER BY's index.
 */
const SORT_SELECTED_MAX = 20000;
const PREPARED_MAX = 256;
/** A page without a page size ends past this much JSON, as the service's pages do (4 MB). */
const PAGE_BYTES = 4 * 1024 * 1024;

const prepared = new Map();

/** Parse, analyse and give the service's semantics to a query (kept, by text). */
function prepare(text) {
  let p = prepared.get(text);
  if (p) {
    prepared.delete(text);
    prepared.set(text, p);
    return p;
  }
  let query;
  try {
    query = queryEngine()(withMarkers(text));
  } catch (err) {
    throw badRequest(err.message);
  }
  const analysis = analyze(query.ast);
  try {
    serviceSemantics(query.ast);
    query.ast.body.top = null; // TOP applies to the rows answered (here), not to the documents read
    void query.code; // the engine's code now: its refusals are the query's 400
  } catch (err) {
    throw badRequest(err.message);
  }
  p = { query, analysis, text };
  prepared.set(text, p);
  if (prepared.size > PREPARED_MAX) prepared.delete(prepared.keys().next().value);
  return p;
}

/** The SQL parameters as the engine takes them, with our functions beside the UDFs. */
function engineOptions(store, parameters, analysis) {
  const params = {};
  for (const { name, value } of parameters || []) params[String(name).slice(1)] = value;
  const udf = { ...(store.udfs() || {}), ...FUNCTIONS };
  let compositeIndexes;
  if (analysis.orderBy) {
    // the engine checks that a composite index serves an ORDER BY of several items: ours
    // (the policy's, checked in `orderOf`), with the hidden _rid order sqlsemantics.js adds
    const dir = analysis.orderBy[0].desc ? "descending" : "ascending";
    const items = analysis.orderBy.map(o => ({
      path: `/${(o.segs || []).join("/")}`, order: o.desc ? "descending" : "ascending"
    }));
    compositeIndexes = [items, [...items, { path: "/_rid", order: dir }]];
  }
  return { parameters: parameters || [], params, udf, compositeIndexes };
}

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

function positionOf(order, doc) {
  return { vals: order ? order.items.map(o => valueAt(doc, o.segs)) : [], rid: doc._rid };
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

  async tick() {
    if (Number(process.hrtime.bigint() - this.slice) / 1e6 < SLICE_MS) return;
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
      const got = keys.take(at[0], at[1], { after: skip, reverse, max });
      const out = [];
      for (const [key, rid] of got) {
        const inside = reverse
          ? keys.compare(key, rid, lo[0], lo[1]) >= 0
          : keys.compare(key, rid, hi[0], hi[1]) < 0;
        if (!inside) {
          done = true;
          break;
        }
        out.push(rid);
        at = [key, rid];
        last = at;
      }
      skip = true;
      if (got.length < max) done = true;
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

/** Whether a document is in what a request is scoped to (partitions.js's scope, and a span). */
function scopeTest(store, scope, span) {
  const { inScope, docEpk } = require("./partitions"); // eslint-disable-line global-require
  const colData = store.colData;
  const scoped = scope && (scope.pk !== null || scope.range !== null || scope.epk !== null);
  if (!scoped && !span) return null;
  return doc => {
    if (scoped && !inScope(colData, doc, scope)) return false;
    if (span) {
      const e = docEpk(colData, doc);
      return e >= span[0] && e < span[1];
    }
    return true;
  };
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
 * utilized, compositeUsed, potential}. A walker's `last()` and `from` are positions in the
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
        const doc = item && item.read();
        if (doc) keyed.push(positionOf(order, doc));
        if ((keyed.length & 1023) === 0) await clock.tick();
      }
      const sorted = Array.from(
        await sortInSlices(keyed.length, (i, j) => compareAt(order, keyed[i], keyed[j]), () => clock.tick()),
        i => keyed[i]);
      const start = from ? bound(sorted, from, (a, b) => compareAt(order, a, b), from.after) : 0;
      return listWalk(sorted, start, k => k.rid);
    };
  }
  return { walk, order, exact, utilized, compositeUsed, potential: [...new Set(missed)] };
}

// ---------------------------------------------------------------- running

/**
 * Documents in a plan's order from `from`, in chunks of at most CHUNK: live (not expired),
 * in the request's scope. `onChunk(docs)` returns true to stop; returns "done", "stopped" or
 * "budget" (a partial page's time ran out), and the walker (its `last()`).
 */
async function eachChunk(store, pl, from, options, clock, onChunk, wanted = () => CHUNK) {
  const walker = await pl.walk(from);
  const colData = store.colData;
  const inScope = scopeTest(store, options.scope, options.span);
  const now = Date.now();
  let grown = 0;
  for (;;) {
    // what the page still needs (an exact filter answers every document it selects), more
    // each time a chunk falls short
    const size = Math.max(1, Math.min(CHUNK, Math.max(wanted(), grown)));
    grown = Math.min(CHUNK, size * 2);
    const rids = clock.index(() => walker.next(size));
    if (rids.length === 0) return { ended: "done", walker };
    const docs = [];
    for (const rid of rids) {
      const item = store.docs._data.get(rid);
      const doc = item && item.read();
      if (!doc || isExpired(colData, doc, now)) continue;
      if (inScope && !inScope(doc)) continue;
      docs.push(doc);
    }
    if (await onChunk(docs)) return { ended: "stopped", walker };
    if (options.partial && clock.over()) return { ended: "budget", walker };
    await clock.tick();
  }
}

/**
 * The entries of a plan's walk that are live and in scope, counted a slice at a time without
 * reading the documents where it can (a COUNT the index answers): `counted(n)` per slice.
 */
async function countEntries(store, pl, from, options, clock, counted) {
  const walker = await pl.walk(from);
  const colData = store.colData;
  const inScope = scopeTest(store, options.scope, options.span);
  const now = Date.now();
  const data = store.docs._data;
  const step = inScope ? CHUNK : 1024; // a scope reads each document (its EPK)
  for (;;) {
    const rids = clock.index(() => walker.next(step));
    if (rids.length === 0) return { ended: "done", walker };
    let n = 0;
    for (const rid of rids) {
      const item = data.get(rid);
      if (!item || itemExpired(colData, item, now)) continue;
      if (inScope) {
        const doc = item.read();
        if (!doc || !inScope(doc)) continue;
      }
      n += 1;
    }
    counted(n);
    if (options.partial && clock.over()) return { ended: "budget", walker };
    await clock.tick();
  }
}

/** The metrics a run reports (query.js turns them into the service's headers). */
function newMetrics(pl) {
  return {
    retrieved: 0,
    retrievedBytes: 0,
    output: 0,
    indexOnly: false,
    utilized: pl ? pl.utilized : [],
    compositeUsed: pl ? pl.compositeUsed : [],
    potential: pl ? pl.potential : [],
    exact: pl ? pl.exact : false,
    totalMs: 0,
    indexMs: 0
  };
}

function finish(metrics, clock) {
  metrics.totalMs = clock.elapsedMs();
  metrics.indexMs = Number(clock.indexNs) / 1e6;
  return metrics;
}

/** A continuation naming a position ({vals, rid, after}) and what else a page carries. */
function continuationAt(pos, extra = {}) {
  return { v: 2, k: encodeVals(pos.vals), r: pos.rid, ...(pos.after ? { x: 1 } : {}), ...extra };
}

/** Where a continuation of ours resumes ({vals, rid, after}), or null: from the start. */
function resumeAt(c) {
  if (!c || c.b) return null;
  return { vals: decodeVals(c.k || []), rid: String(c.r), after: Boolean(c.x) };
}

/**
 * The page of a plan whose index was not built within the budget: nothing yet, and a
 * continuation that starts where this one would have ({b: 1}: from the beginning).
 */
function notBuiltPage(c, metrics) {
  const keep = c ? { ...c } : { v: 2, b: 1, n: 0 };
  return { result: [], continuation: keep, metrics };
}

/**
 * One page of a query's rows: {result, continuation, metrics}. `options`: parameters, scope
 * (partitions.js requestScope) and span (an EPK range), maxItemCount, continuation (ours,
 * parsed), partial (the page may end when its budget runs out), measure (count the
 * retrieved documents' bytes).
 */
async function runPage(store, text, options) {
  const p = prepare(text);
  const eo = engineOptions(store, options.parameters, p.analysis);
  const clock = new Clock(options.partial ? budgetMs : null);
  const c = options.continuation;
  let pl;
  try {
    pl = await plan(store, p, { ...options, params: eo.params }, clock);
  } catch (err) {
    if (err instanceof NotBuilt) return notBuiltPage(c, finish(newMetrics(null), clock));
    throw err;
  }
  const metrics = newMetrics(pl);
  const top = p.analysis.top ? topOf(p.analysis.top, eo.params) : null;
  let produced = c && Number.isInteger(c.n) ? c.n : 0;
  let token = c && c.t ? c.t : null;
  const max = options.maxItemCount > 0 ? options.maxItemCount : Infinity;
  const rows = [];
  let bytes = 0;
  let cut = null;
  const { ended, walker } = await eachChunk(store, pl, resumeAt(c), options, clock, docs => {
    const left = Math.min(max - rows.length, top === null ? Infinity : top - produced);
    if (left <= 0) return true;
    if (docs.length === 0) return false;
    metrics.retrieved += docs.length;
    if (options.measure) for (const d of docs) metrics.retrievedBytes += Buffer.byteLength(JSON.stringify(d));
    let r;
    try {
      r = p.query.exec(docs, {
        parameters: eo.parameters,
        udf: eo.udf,
        compositeIndexes: eo.compositeIndexes,
        maxItemCount: Number.isFinite(left) ? left : undefined,
        continuation: token ? { token } : undefined
      });
    } catch (err) {
      throw badRequest(err.message);
    }
    token = null;
    rows.push(...r.result);
    produced += r.result.length;
    if (max > 100) bytes += JSON.stringify(r.result).length; // only pages that may grow large
    if (r.continuation) {
      // the engine stopped before a document (its _rid; SRC: how many of its rows were given)
      const engine = decodeEngineToken(r.continuation.token);
      const doc = docs.find(d => d._rid === engine.RID);
      cut = { pos: positionOf(pl.order, doc), t: engine.SRC ? r.continuation.token : null };
      return true;
    }
    return rows.length >= max || (top !== null && produced >= top) || bytes >= PAGE_BYTES;
  }, () => Math.min(max - rows.length, top === null ? Infinity : top - produced));
  let continuation = null;
  const topDone = top !== null && produced >= top;
  if (!topDone && ended !== "done") {
    if (cut) continuation = continuationAt(cut.pos, { n: produced, ...(cut.t ? { t: cut.t } : {}) });
    else {
      const last = walker.last();
      if (last) continuation = continuationAt({ ...last, after: true }, { n: produced });
      else if (c) continuation = { ...c, n: produced };
    }
  }
  metrics.output = rows.length;
  return { result: rows, continuation, metrics: finish(metrics, clock) };
}

function topOf(node, params) {
  const v = node.type === "parameter_name" ? params[node.name.slice(1)] : node.value;
  if (!Number.isInteger(v) || v < 0) throw badRequest("TOP must be a non-negative integer.");
  return v;
}

/** The parts of the engine's continuation token (`+RID:...#SRC:n#...`) used here. */
function decodeEngineToken(token) {
  const out = {};
  for (const part of String(token).slice(1).split("#")) {
    const i = part.indexOf(":");
    out[part.slice(0, i)] = part.slice(i + 1);
  }
  out.SRC = parseInt(out.SRC || "0", 10) || 0;
  return out;
}

/** Every row of a query (DISTINCT, OFFSET/LIMIT and aggregates of objects are cut from them). */
async function runAll(store, text, options) {
  const page = await runPage(store, text, { ...options, continuation: null, maxItemCount: -1, partial: false });
  return { result: page.result, metrics: page.metrics };
}

/**
 * A query the engine runs over every document in scope at once (aggregates in an object, as
 * in `SELECT COUNT(1) AS n FROM c` in one partition): the documents are selected a slice at a
 * time, then given to the engine together. {result, metrics}.
 */
async function runWhole(store, text, options) {
  const p = prepare(text);
  const eo = engineOptions(store, options.parameters, p.analysis);
  const clock = new Clock(null);
  const pl = await plan(store, p, { ...options, params: eo.params }, clock);
  const metrics = newMetrics(pl);
  const docs = [];
  await eachChunk(store, pl, null, { ...options, partial: false }, clock, chunk => {
    docs.push(...chunk);
    return false;
  });
  metrics.retrieved = docs.length;
  if (options.measure) for (const d of docs) metrics.retrievedBytes += Buffer.byteLength(JSON.stringify(d));
  let r;
  try {
    r = p.query.exec(docs, { parameters: eo.parameters, udf: eo.udf, compositeIndexes: eo.compositeIndexes });
  } catch (err) {
    throw badRequest(err.message);
  }
  metrics.output = r.result.length;
  return { result: r.result, metrics: finish(metrics, clock) };
}

/**
 * Aggregates over the documents in scope, each `SELECT VALUE AGG(x) ...` of `parts`
 * ([{name, text}], one WHERE: the first's plan serves all): {values, continuation, metrics}.
 * With `partial`, the aggregates of the documents read before the budget ran out and a
 * continuation: the plan's per-range form, whose partial results the SDK combines across
 * pages (each page answers its own). The engine computes each chunk's, combined here.
 */
async function runAggregate(store, parts, options) {
  const prepared = parts.map(part => ({ ...part, p: prepare(part.text) }));
  const [first] = prepared;
  const eo = engineOptions(store, options.parameters, first.p.analysis);
  const clock = new Clock(options.partial ? budgetMs : null);
  const c = options.continuation;
  let pl;
  try {
    pl = await plan(store, first.p, { ...options, params: eo.params }, clock);
  } catch (err) {
    if (err instanceof NotBuilt) {
      return { values: prepared.map(() => undefined), continuation: notBuiltPage(c, null).continuation,
        metrics: finish(newMetrics(null), clock) };
    }
    throw err;
  }
  const metrics = newMetrics(pl);
  const a = first.p.analysis;
  const arg = a.aggregate && a.aggregate.argument;
  const constant = arg && ["number_constant", "string_constant", "boolean_constant", "null_constant"].includes(arg.type);
  // a COUNT of every document the index selects: its entries, no document read
  metrics.indexOnly = prepared.length === 1 && first.name === "COUNT" && constant && pl.exact &&
    !a.joins && a.plain;
  const values = prepared.map(part => (part.name === "COUNT" || part.name === "SUM" ? 0 : undefined));
  const { ended, walker } = metrics.indexOnly
    ? await countEntries(store, pl, resumeAt(c), options, clock, n => { values[0] += n; })
    : await eachChunk(store, pl, resumeAt(c), options, clock, docs => {
      if (docs.length === 0) return false;
      metrics.retrieved += docs.length;
      if (options.measure) for (const d of docs) metrics.retrievedBytes += Buffer.byteLength(JSON.stringify(d));
      prepared.forEach((part, i) => {
        let r;
        try {
          r = part.p.query.exec(docs, { parameters: eo.parameters, udf: eo.udf, compositeIndexes: eo.compositeIndexes });
        } catch (err) {
          throw badRequest(err.message);
        }
        values[i] = combined(part.name, values[i], r.result.length ? r.result[0] : undefined);
      });
      return false;
    });
  let continuation = null;
  if (ended === "budget") {
    const last = walker.last();
    if (last) continuation = continuationAt({ ...last, after: true });
    else if (c) continuation = c;
  }
  metrics.output = 1;
  return { values, continuation, metrics: finish(metrics, clock) };
}

/** Two partial results of an aggregate, combined (MIN / MAX across types in the service's order). */
function combined(name, a, b) {
  if (b === undefined) return name === "SUM" ? undefined : a; // a SUM over a non-number is undefined
  switch (name) {
    case "COUNT":
      return a + b;
    case "SUM":
      return typeof a === "number" && typeof b === "number" ? a + b : undefined;
    case "MIN":
    case "MAX": {
      if (a === undefined) return b;
      const cmp = compareValues(a, b);
      if (name === "MIN") return cmp <= 0 ? a : b;
      return cmp >= 0 ? a : b;
    }
    default:
      return undefined;
  }
}

/**
 * `text` run by the engine over `docs` (a patch's condition on the document it patches), with
 * the service's semantics: {result}.
 */
function evaluate(store, text, docs) {
  const p = prepare(text);
  return p.query.exec(docs, { parameters: [], udf: { ...(store.udfs() || {}), ...FUNCTIONS } });
}

/** Set the page budget (ms, local only: the control route); null puts the default back. */
function setBudget(ms) {
  budgetMs = ms === null || ms === undefined ? BUDGET_DEFAULT_MS : ms;
  return budgetMs;
}

function budget() {
  return budgetMs;
}

module.exports = {
  prepare,
  runPage,
  runAll,
  runAggregate,
  runWhole,
  evaluate,
  setBudget,
  budget,
  BUDGET_DEFAULT_MS
};
