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
 *   - Never stall: the engine runs in the endpoint's query threads (queryworker.js): the main
 *     thread only walks the index and hands over the documents' text, a batch at a time,
 *     between slices of SLICE_MS, so point reads, writes and change feed polls of other
 *     clients are answered meanwhile and do not wait for the engine.
 *
 * Which documents a query reads, in which order, and its time slices: querywalk.js; the
 * engine's part (parsing the documents, evaluating the query a chunk at a time):
 * queryengine.js.
 */

const { itemExpired } = require("./store");
const { badRequest } = require("./responses");
const { prepare: prepareQuery, evaluate: evaluateHere, combined, Refused, CHUNK } = require("./queryengine");
const queryThreads = require("./queryworker");
const {
  encodeVals, decodeVals, Clock, scopeTest, NotBuilt, built, refused, orderOf, plan
} = require("./querywalk");

/** A page is answered once it has run this long (the rest follows with the continuation). */
const BUDGET_DEFAULT_MS = 1000;
let budgetMs = BUDGET_DEFAULT_MS;
/** Budgets set for a database or a container of it (setBudget's scope), by scopeKey. */
const scopedBudgets = new Map();
const scopeKey = (database, container) => JSON.stringify([database, container]);
/** The syntax tree's constants (a COUNT of one counts documents). */
const CONSTANTS = ["number_constant", "string_constant", "boolean_constant", "null_constant"];
/** Documents (and their JSON's characters) handed to a query thread at once, at most. */
const BATCH_DOCUMENTS = 512;
const BATCH_CHARS = 512 * 1024;

/** Parse, analyse and give the service's semantics to a query (kept, by text): a refusal is 400. */
function prepare(text) {
  try {
    return prepareQuery(text);
  } catch (err) {
    if (err instanceof Refused) throw badRequest(err.message);
    throw err;
  }
}

/** The SQL parameters by name (without "@"), for the plan's index lookups. */
function paramsOf(parameters) {
  const params = {};
  for (const { name, value } of parameters || []) params[String(name).slice(1)] = value;
  return params;
}

/** The container's UDFs as their source (id -> source), for a query thread. */
function udfSources(store) {
  const out = {};
  for (const [id, fn] of Object.entries(store.udfs() || {})) out[id] = String(fn);
  return out;
}

/**
 * A task's result from a query thread (queryengine.js), the background lane's for a plan that
 * walks many documents; the engine's refusal is the 400.
 */
async function evaluated(task, pl) {
  const result = await queryThreads.run(task, pl.estimate > queryThreads.BACKGROUND_DOCUMENTS);
  if (result.error !== undefined) throw badRequest(result.error);
  return result;
}

// ---------------------------------------------------------------- running

/**
 * Documents in a plan's order from `from`, live (not expired) and in the request's scope (as
 * stored: store.js StoredDocument), in batches of chunks (a chunk: at most CHUNK documents,
 * what the engine is given at once; a batch: what a query thread is handed at once, gathered
 * within a slice). `onBatch(batch)` gets [{docs, last}] (`last`: the walk's position after
 * the chunk) and returns (a promise of) true to stop. Returns {ended: "done" | "stopped" |
 * "budget" (a partial page's time ran out), walker}. `target()` is how many documents the next
 * batch walks (a page's: what it still needs at the rate its documents have given rows so
 * far), BATCH_DOCUMENTS at most. `ahead`: batches handed over before the first is answered
 * (where the answers do not decide what comes next).
 */
async function eachBatch(store, pl, from, options, clock, onBatch, { target = () => BATCH_DOCUMENTS, ahead = 1 } = {}) {
  const walker = await pl.walk(from);
  const inflight = [];
  const settle = async all => {
    while (inflight.length > (all ? 0 : ahead - 1)) if (await inflight.shift()) return true;
    return false;
  };
  const colData = store.colData;
  const inScope = scopeTest(store, options.scope, options.span);
  const now = Date.now();
  const data = store.docs._data;
  for (;;) {
    const batch = [];
    let documents = 0;
    let chars = 0;
    let done = false;
    const walk = Math.max(1, Math.min(BATCH_DOCUMENTS, target()));
    do {
      const size = Math.min(CHUNK, walk - documents);
      const rids = clock.index(() => walker.next(size));
      if (rids.length === 0) {
        done = true;
        break;
      }
      const docs = [];
      for (const rid of rids) {
        const item = data.get(rid);
        if (!item || itemExpired(colData, item, now)) continue;
        if (inScope && !inScope(item)) continue;
        docs.push(item);
        chars += item.json.length;
      }
      batch.push({ docs, last: walker.last() });
      documents += rids.length;
    } while (documents < walk && chars < BATCH_CHARS && !clock.sliceOver() &&
      !(options.partial && clock.over()));
    if (batch.length) {
      const answered = Promise.resolve(onBatch(batch));
      answered.catch(() => {}); // awaited below: no rejection is left unhandled meanwhile
      inflight.push(answered);
      if (await settle(false)) return { ended: "stopped", walker };
    }
    if (done || (options.partial && clock.over())) {
      if (await settle(true)) return { ended: "stopped", walker };
      return { ended: done ? "done" : "budget", walker };
    }
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
  const params = paramsOf(options.parameters);
  const clock = new Clock(options.partial ? budgetFor(store) : null);
  const c = options.continuation;
  let pl;
  try {
    pl = await plan(store, p, { ...options, params }, clock);
  } catch (err) {
    if (err instanceof NotBuilt) return notBuiltPage(c, finish(newMetrics(null), clock));
    throw err;
  }
  const metrics = newMetrics(pl);
  const top = p.analysis.top ? topOf(p.analysis.top, params) : null;
  let produced = c && Number.isInteger(c.n) ? c.n : 0;
  let token = c && c.t ? c.t : null;
  const max = options.maxItemCount > 0 ? options.maxItemCount : Infinity;
  const rows = [];
  let bytes = 0;
  let cut = null;
  let stoppedAt = null;
  let notJson = false; // a row held an infinity or NaN (queryengine.js evaluate)
  const udfs = udfSources(store);
  const order = pl.order ? { items: pl.order.items.map(o => ({ segs: o.segs })) } : null;
  const { ended, walker } = await eachBatch(store, pl, resumeAt(c), options, clock, async batch => {
    const r = await evaluated({
      kind: "rows",
      text: p.text,
      parameters: options.parameters,
      udfs,
      chunks: batch.map(b => b.docs),
      max,
      top,
      have: rows.length,
      produced,
      token,
      bytes,
      order,
      measure: options.measure
    }, pl);
    token = null;
    for (const row of r.rows) rows.push(row);
    notJson = notJson || Boolean(r.notJson);
    produced = r.produced;
    bytes = r.bytes;
    metrics.retrieved += r.retrieved;
    metrics.retrievedBytes += r.retrievedBytes;
    if (r.cut) {
      // the engine stopped before a document (its position; how many of its rows were given)
      cut = r.cut;
      return true;
    }
    if (r.stop) {
      // the page is full: it resumes after the last chunk the engine was given in whole
      stoppedAt = r.consumed > 0 ? batch[r.consumed - 1].last : null;
      return true;
    }
    return false;
  }, {
    target: () => {
      // the rows the page still needs, at the rate its documents gave rows so far (one each,
      // to begin with: an index that answers the filter gives no other)
      const need = Math.min(max - rows.length, top === null ? BATCH_DOCUMENTS : top - produced);
      const rate = metrics.retrieved ? Math.max(rows.length, 1) / metrics.retrieved : 1;
      return Math.ceil(need / rate);
    }
  });
  let continuation = null;
  const topDone = top !== null && produced >= top;
  if (!topDone && ended !== "done") {
    if (cut) continuation = continuationAt(cut.pos, { n: produced, ...(cut.t ? { t: cut.t } : {}) });
    else {
      const last = ended === "stopped" ? stoppedAt : walker.last();
      if (last) continuation = continuationAt({ ...last, after: true }, { n: produced });
      else if (c) continuation = { ...c, n: produced };
    }
  }
  metrics.output = rows.length;
  return { result: rows, continuation, metrics: finish(metrics, clock), notJson };
}

function topOf(node, params) {
  const v = node.type === "parameter_name" ? params[node.name.slice(1)] : node.value;
  if (!Number.isInteger(v) || v < 0) throw badRequest("TOP must be a non-negative integer.");
  return v;
}

/** Every row of a query (DISTINCT, OFFSET/LIMIT and aggregates of objects are cut from them). */
async function runAll(store, text, options) {
  const page = await runPage(store, text, { ...options, continuation: null, maxItemCount: -1, partial: false });
  return { result: page.result, metrics: page.metrics, notJson: page.notJson };
}

/**
 * A query the engine runs over every document in scope at once (aggregates in an object, as
 * in `SELECT COUNT(1) AS n FROM c` in one partition): the documents are selected a slice at a
 * time, then given to the engine together. {result, metrics, notJson} (queryengine.js
 * `evaluate`: a row held an infinity or NaN).
 */
async function runWhole(store, text, options) {
  const p = prepare(text);
  const clock = new Clock(null);
  const pl = await plan(store, p, { ...options, params: paramsOf(options.parameters) }, clock);
  const metrics = newMetrics(pl);
  const chunks = [];
  await eachBatch(store, pl, null, { ...options, partial: false }, clock, batch => {
    for (const b of batch) chunks.push(b.docs);
    return false;
  });
  const r = await evaluated({
    kind: "whole", text: p.text, parameters: options.parameters, udfs: udfSources(store), chunks,
    measure: options.measure
  }, pl);
  metrics.retrieved = r.retrieved;
  metrics.retrievedBytes = r.retrievedBytes;
  metrics.output = r.result.length;
  return { result: r.result, metrics: finish(metrics, clock), notJson: Boolean(r.notJson) };
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
  const params = paramsOf(options.parameters);
  const clock = new Clock(options.partial ? budgetFor(store) : null);
  const c = options.continuation;
  if (wholeContainerCount(prepared, options) && !c) {
    // COUNT(1) of every document of a container: how many it holds, not a walk of them
    const metrics = { ...newMetrics(null), indexOnly: true, exact: true, output: 1 };
    const n = clock.index(() => store.count(Date.now()));
    return { values: [n], continuation: null, metrics: finish(metrics, clock) };
  }
  let pl;
  try {
    pl = await plan(store, first.p, { ...options, params }, clock);
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
  const udfs = udfSources(store);
  const task = { kind: "aggregate", parts: parts.map(({ name, text }) => ({ name, text })),
    parameters: options.parameters, udfs, measure: options.measure };
  const { ended, walker } = metrics.indexOnly
    ? await countEntries(store, pl, resumeAt(c), options, clock, n => { values[0] += n; })
    : await eachBatch(store, pl, resumeAt(c), options, clock, async batch => {
      const r = await evaluated({ ...task, chunks: batch.map(b => b.docs) }, pl);
      metrics.retrieved += r.retrieved;
      metrics.retrievedBytes += r.retrievedBytes;
      prepared.forEach((part, i) => { values[i] = combined(part.name, values[i], r.values[i]); });
      return false;
    }, { ahead: 2 });
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

/**
 * A query without FROM, evaluated once, in this thread (it reads no document): the engine is
 * given one empty document, which the query cannot name. {result, metrics, notJson}.
 */
function runSourceless(store, text, options) {
  const p = prepare(text);
  const r = evaluateHere({
    kind: "whole", text: p.text, parameters: options.parameters, udfs: udfSources(store), chunks: [[{}]]
  });
  if (r.error !== undefined) throw badRequest(r.error);
  return { result: r.result, metrics: { ...newMetrics(null), retrieved: 0 }, notJson: Boolean(r.notJson) };
}

/**
 * `text` run by the engine over `docs` (a patch's condition on the document it patches), with
 * the service's semantics, in this thread: {result}.
 */
function evaluate(store, text, docs) {
  const p = prepare(text);
  const r = evaluateHere({ kind: "whole", text: p.text, parameters: [], udfs: udfSources(store), chunks: [docs] });
  if (r.error !== undefined) throw badRequest(r.error);
  return { result: r.result };
}

/**
 * Set the page budget (ms, local only: the control route); null puts the default back.
 * `scope` ({database, container}: a database, or a container of it) sets it for the queries
 * on that database's containers (that container) only; null there removes that scope's.
 */
function setBudget(ms, scope = null) {
  if (scope && scope.database !== null) {
    const key = scopeKey(scope.database, scope.container);
    if (ms === null || ms === undefined) scopedBudgets.delete(key);
    else scopedBudgets.set(key, ms);
    return budget(scope);
  }
  budgetMs = ms === null || ms === undefined ? BUDGET_DEFAULT_MS : ms;
  return budgetMs;
}

/** The budget of a scope's queries ({database, container}; null: the endpoint's). */
function budget(scope = null) {
  if (scope && scope.database !== null) {
    for (const key of [scopeKey(scope.database, scope.container), scopeKey(scope.database, null)]) {
      if (scopedBudgets.has(key)) return scopedBudgets.get(key);
    }
  }
  return budgetMs;
}

/** The budgets set for a database or a container: [{database, container, budgetMs}]. */
function scopedBudgetList() {
  return [...scopedBudgets].map(([key, ms]) => {
    const [database, container] = JSON.parse(key);
    return { database, container, budgetMs: ms };
  });
}

/** The page budget of a query on `store` (its container's, its database's, the endpoint's). */
function budgetFor(store) {
  return budget(store.names);
}

module.exports = {
  prepare,
  runPage,
  runAll,
  runAggregate,
  runWhole,
  runSourceless,
  evaluate,
  setBudget,
  budget,
  scopedBudgetList,
  BUDGET_DEFAULT_MS
};
