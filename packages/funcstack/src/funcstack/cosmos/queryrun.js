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
 * Which documents a query reads, in which order, and its time slices: querywalk.js.
 *
 * The engine is given at most CHUNK documents at once: its FROM builds its rows by spreading an
 * array into a new one per document, quadratic in what it is given at once.
 */

const { compareValues } = require("./sortedkeys");
const { analyze } = require("./queryindex");
const { withMarkers, serviceSemantics, FUNCTIONS } = require("./sqlsemantics");
const { queryEngine } = require("./sqlparser");
const { itemExpired } = require("./store");
const { badRequest } = require("./responses");
const {
  positionOf, encodeVals, decodeVals, Clock, scopeTest, NotBuilt, built, refused, orderOf, plan
} = require("./querywalk");

/** A page is answered once it has run this long (the rest follows with the continuation). */
const BUDGET_DEFAULT_MS = 1000;
let budgetMs = BUDGET_DEFAULT_MS;
/** Documents given to the engine at once (its FROM is quadratic in them). */
const CHUNK = 32;
const PREPARED_MAX = 256;
/** The syntax tree's constants (a COUNT of one counts documents). */
const CONSTANTS = ["number_constant", "string_constant", "boolean_constant", "null_constant"];
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
      if (!item || itemExpired(colData, item, now)) continue;
      if (inScope && !inScope(item)) continue;
      docs.push(item.read());
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
  const step = inScope ? 256 : 1024; // a scope reads each document's EPK (kept once computed)
  for (;;) {
    const rids = clock.index(() => walker.next(step));
    if (rids.length === 0) return { ended: "done", walker };
    let n = 0;
    for (const rid of rids) {
      const item = data.get(rid);
      if (!item || itemExpired(colData, item, now)) continue;
      if (inScope && !inScope(item)) continue;
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
  if (wholeContainerCount(prepared, options) && !c) {
    // COUNT(1) of every document of a container: how many it holds, not a walk of them
    const metrics = { ...newMetrics(null), indexOnly: true, exact: true, output: 1 };
    const n = clock.index(() => store.count(Date.now()));
    return { values: [n], continuation: null, metrics: finish(metrics, clock) };
  }
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
  const constant = arg && CONSTANTS.includes(arg.type);
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

/**
 * Whether `parts` is the COUNT of a constant over every document of a whole container (no
 * filter, no JOIN, no order; not scoped by a partition key, a range or a feed range): what
 * the container's count answers (store.js `count`).
 */
function wholeContainerCount(parts, options) {
  if (parts.length !== 1 || parts[0].name !== "COUNT") return false;
  const a = parts[0].p.analysis;
  const arg = a.aggregate && a.aggregate.argument;
  if (!arg || !CONSTANTS.includes(arg.type) || a.where.kind !== "all" || a.joins || !a.plain || a.orderBy) return false;
  const scope = options.scope;
  return !options.span && (!scope || (scope.pk === null && scope.range === null && scope.epk === null));
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
