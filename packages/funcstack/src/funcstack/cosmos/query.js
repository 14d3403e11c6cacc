"use strict";
/*
 * Queries and the read feed of the local Cosmos DB endpoint (server.js), answered as the
 * service's gateway answers them; how a query runs (from the container's indexes, a slice
 * at a time, pages that resume) is queryrun.js:
 *
 *   - scoped by the partition key header or a feed range (partitions.js);
 *   - a cross-partition query the gateway cannot serve (ORDER BY, TOP, OFFSET/LIMIT,
 *     DISTINCT, aggregates) is refused with 400 / sub-status 1004 and its query plan, which
 *     the SDK also fetches on its own (x-ms-cosmos-is-query-plan-request, queryplan.js), then
 *     sends the rewritten query per range (x-ms-documentdb-partitionkeyrangeid) and merges;
 *     one it can serve goes over several physical partitions one range per answer
 *     (acrossRanges), as the gateway does;
 *   - added to the engine: DISTINCT (by value), OFFSET/LIMIT, keyword-named properties,
 *     parameters of any name, the plan's per-range aggregates (partial results a page at a
 *     time, which the SDK combines);
 *   - pages of `x-ms-max-item-count` with `x-ms-continuation` (queryrun.js's positions); a
 *     page also ends when its time budget runs out, and a page may be empty: the SDKs follow
 *     the continuation; a service-format token (of another container) starts from the
 *     beginning;
 *   - query metrics (x-ms-documentdb-populatequerymetrics: documents retrieved, the index
 *     lookup's time and utilization) and index metrics (x-ms-cosmos-populateindexmetrics: the
 *     indexes used and those the policy lacks, base64 JSON as the service sends them).
 */

const { engineShape, needsPlan, queryPlan, rewrittenAggregate, valueAggregate } = require("./queryplan");
const { CosmosError, CROSS_PARTITION_QUERY_NOT_SERVABLE, badRequest, send } = require("./responses");
const { readJson, header, isTrue, headerPartitionKey, controlScope } = require("./requests");
const { answerFor, requestScope } = require("./partitions");
const { liveRanges } = require("./ranges");
const { runPage, runAll, runAggregate, runWhole, runSourceless, prepare, setBudget, budget, scopedBudgetList } = require("./queryrun");
const { NOT_JSON, holdsNotJson } = require("./queryengine");

/** A continuation the client sent: ours (parsed), or null to start from the beginning. */
function parseContinuation(raw) {
  if (!raw || /^-RID:/.test(raw)) {
    // a service-format token (its resource id names another container's pages): the service
    // does not resume from a token that is not for this query, it starts from the beginning
    return null;
  }
  let parsed;
  try {
    parsed = JSON.parse(raw);
  } catch (e) {
    throw badRequest("Invalid continuation token");
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw badRequest("Invalid continuation token");
  return parsed;
}

/**
 * One page of a query over the documents in scope (`scope`: partitions.js requestScope;
 * `span`: an EPK range, acrossRanges) from the continuation `c` (parsed, or null):
 * {result, continuation, metrics}.
 */
async function queryDocuments(store, body, req, scope, span, c) {
  const maxItemCount = parseInt(header(req, "x-ms-max-item-count") || "-1", 10);
  const { query: text, parameters } = renameParameters(body.query, body.parameters || []);
  const measure = isTrue(req, "x-ms-documentdb-populatequerymetrics");
  const base = { parameters, scope, span, measure, maxItemCount };
  if (c && c.v !== 2 && !Number.isInteger(c.local)) throw badRequest("Invalid continuation token");
  const aggregate = rewrittenAggregate(text);
  if (aggregate) {
    // a range's part of a plan's aggregate (`SELECT VALUE [{"item": AGG(x)}] ...`):
    // [{"item": value}] (AVG as its sum and count), for the SDK to combine across ranges and
    // pages; a page that ran out of time answers the part it read
    const parts = aggregate.name === "avg"
      ? [{ name: "SUM" }, { name: "COUNT" }]
      : [{ name: aggregate.name.toUpperCase() }];
    for (const part of parts) part.text = `SELECT VALUE ${part.name}(${aggregate.argument}) ${aggregate.source}`;
    const r = await runAggregate(store, parts, { ...base, continuation: c, partial: true });
    if (holdsNotJson(r.values)) throw badRequest(NOT_JSON);
    const item = aggregate.name === "avg" ? { sum: r.values[0], count: r.values[1] } : r.values[0];
    // one row: the value the rewritten query selects, [{"item": value}]
    return { result: [[item === undefined ? {} : { item }]], continuation: r.continuation, metrics: r.metrics };
  }
  const shape = engineShape(text, parameters, badRequest);
  if (headerPartitionKey(req) === null && shape.aggregateWithoutValue) {
    throw badRequest("Cross partition query only supports 'VALUE <AggregateFunc>' for aggregates.");
  }
  const once = await answeredAtOnce(store, shape, parameters, base);
  if (once) {
    const rows = cut(once.result, shape);
    if (holdsNotJson(rows)) throw badRequest(NOT_JSON);
    return { result: rows, continuation: null, metrics: { ...once.metrics, output: rows.length } };
  }
  if (!shape.distinct && shape.offset === null) {
    const page = await runPage(store, shape.query, { ...base, continuation: c, partial: true });
    if (page.notJson && holdsNotJson(page.result)) throw badRequest(NOT_JSON);
    return page;
  }
  // DISTINCT and OFFSET/LIMIT, which the package's engine does not parse, are applied to
  // the whole (ordered) result here; pages are cut from it with a continuation of our own.
  const all = await runAll(store, shape.query, base);
  let rows = all.result;
  if (shape.distinct) rows = distinct(rows);
  if (shape.offset !== null) rows = rows.slice(shape.offset, shape.offset + shape.limit);
  if (all.notJson && holdsNotJson(rows)) throw badRequest(NOT_JSON);
  const start = c && Number.isInteger(c.local) ? c.local : 0;
  const end = maxItemCount > 0 ? start + maxItemCount : rows.length;
  return {
    result: rows.slice(start, end),
    continuation: end < rows.length ? { local: end } : null,
    metrics: { ...all.metrics, output: Math.min(end, rows.length) - start }
  };
}

/**
 * The rows of a query the engine answers in one go, or null: one without FROM (evaluated
 * once, on nothing, as the service evaluates it: not once per document read), a `SELECT VALUE
 * AGG(x)` (from partial results, queryrun.js) and aggregates in an object (over every document
 * at once). Their TOP, DISTINCT and OFFSET LIMIT are applied to these rows (`cut`), not to the
 * documents read. {result, metrics}: a row that held an infinity or NaN is the value itself (an
 * aggregate's) or queryengine.js's mark for it, which `holdsNotJson` finds.
 */
async function answeredAtOnce(store, shape, parameters, base) {
  if (!prepare(shape.query).query.ast.body.from) return runSourceless(store, shape.query, base);
  const value = valueAggregate(shape.query, parameters, badRequest);
  if (value) {
    const name = value.name.toUpperCase();
    const parts = name === "AVG" ? [{ name: "SUM" }, { name: "COUNT" }] : [{ name }];
    for (const part of parts) part.text = `SELECT VALUE ${part.name}(${value.argument}) ${value.source}`;
    const r = await runAggregate(store, parts, { ...base, continuation: null, partial: false });
    let v = r.values[0];
    if (name === "AVG") v = r.values[1] > 0 && typeof r.values[0] === "number" ? r.values[0] / r.values[1] : undefined;
    return { result: v === undefined ? [] : [v], metrics: r.metrics };
  }
  if (prepare(shape.query).analysis.aggregates) return runWhole(store, shape.query, base);
  return null;
}

/** Rows answered at once cut as the query's DISTINCT, OFFSET LIMIT and TOP say. */
function cut(rows, shape) {
  let out = shape.distinct ? distinct(rows) : rows;
  if (shape.offset !== null) out = out.slice(shape.offset, shape.offset + shape.limit);
  return shape.top !== null ? out.slice(0, shape.top) : out;
}

/** The rows without the repeats of one (DISTINCT: by value, the order of fields ignored). */
function distinct(rows) {
  const seen = new Set();
  return rows.filter(row => {
    const key = canonicalJson(row);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/**
 * Parameters get names of our own and properties named like keywords are read with brackets:
 * the package's parser refuses both where the service's does not. String literals are left
 * as they are.
 */
function renameParameters(text, parameters) {
  const renamed = text.replace(
    /('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|@([A-Za-z_][A-Za-z0-9_]*)|\.((?:value|select|from|where|and|or|not|in|between|top|order|by|asc|desc|true|false|null|undefined|join|exists|array|as|like|offset|limit|distinct|group)[A-Za-z0-9_]+)/gi,
    (match, literal, name, property) => {
      if (literal !== undefined) return literal;
      // a property whose name starts with a keyword (c.value1) trips the package's parser
      if (property !== undefined) return `["${property}"]`;
      return `@p__${name}`;
    });
  return {
    query: renamed,
    parameters: parameters.map(p => (p && typeof p.name === "string" && p.name.startsWith("@")
      ? { ...p, name: `@p__${p.name.slice(1)}` } : p))
  };
}

/** JSON with object keys sorted: DISTINCT compares values, not the order of their fields. */
function canonicalJson(value) {
  if (value === undefined) return "undefined";
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  return `{${Object.keys(value).sort().map(k => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(",")}}`;
}

function sendFeed(req, res, store, result, extra = {}) {
  const headers = { "x-ms-item-count": String(result.result.length), ...extra };
  if (result.continuation) headers["x-ms-continuation"] = JSON.stringify(result.continuation);
  send(req, res, 200, { _rid: store.colData._rid, Documents: result.result, _count: result.result.length }, headers);
}

async function handleQuery(req, res, store) {
  let body = await readJson(req);
  if (typeof body === "string") body = { query: body };
  if (!body || typeof body.query !== "string") throw badRequest("missing query");
  if (body.parameters !== undefined && body.parameters !== null && !Array.isArray(body.parameters)) {
    throw badRequest("The query's parameters must be an array of {name, value}.");
  }
  if (headerPartitionKey(req) === null && header(req, "x-ms-documentdb-partitionkeyrangeid") === undefined &&
      needsPlan(body.query, body.parameters, badRequest)) {
    // as the service's gateway: the SDK is to fetch the plan and query every range itself
    const err = new CosmosError(400, "BadRequest",
      "Cross partition query with TOP/ORDER BY/OFFSET LIMIT/DISTINCT/aggregates is not servable by the gateway.",
      CROSS_PARTITION_QUERY_NOT_SERVABLE);
    err.additionalErrorInfo = JSON.stringify(queryPlan(body.query, body.parameters, badRequest));
    throw err;
  }
  let result;
  try {
    result = await acrossRanges(req, res, store, body);
  } catch (err) {
    if (err instanceof CosmosError) throw err;
    throw badRequest(err.message);
  }
  const extra = {};
  if (isTrue(req, "x-ms-documentdb-populatequerymetrics")) {
    extra["x-ms-documentdb-query-metrics"] = queryMetrics(result.metrics);
  }
  if (isTrue(req, "x-ms-cosmos-populateindexmetrics")) {
    extra["x-ms-cosmos-index-utilization"] = indexUtilization(result.metrics);
  }
  sendFeed(req, res, store, result, extra);
}

/**
 * x-ms-documentdb-query-metrics with this endpoint's own figures: the documents the query read
 * (none for a COUNT the index answers), its time and the index lookup's, and the index
 * utilization (rows kept of the documents read; 1 when the index answered the filter exactly).
 */
function queryMetrics(m) {
  const ms = v => (v || 0).toFixed(2);
  let ratio = m.retrieved > 0 ? Math.min(1, m.output / m.retrieved) : 1;
  if (m.indexOnly || (m.exact && m.retrieved > 0)) ratio = 1;
  return [
    `totalExecutionTimeInMs=${ms(m.totalMs)}`,
    "queryCompileTimeInMs=0.00",
    "queryLogicalPlanBuildTimeInMs=0.00",
    "queryPhysicalPlanBuildTimeInMs=0.00",
    "queryOptimizationTimeInMs=0.00",
    `VMExecutionTimeInMs=${ms(m.totalMs - m.indexMs)}`,
    `indexLookupTimeInMs=${ms(m.indexMs)}`,
    "documentLoadTimeInMs=0.00",
    "systemFunctionExecuteTimeInMs=0.00",
    "userFunctionExecuteTimeInMs=0.00",
    `retrievedDocumentCount=${m.retrieved}`,
    `retrievedDocumentSize=${m.retrievedBytes}`,
    `outputDocumentCount=${m.output}`,
    "outputDocumentSize=0",
    "writeOutputTimeInMs=0.00",
    `indexUtilizationRatio=${ratio.toFixed(2)}`
  ].join(";");
}

/**
 * x-ms-cosmos-index-utilization: base64 of the service's JSON (the SDKs decode it): the
 * single and composite indexes the query used, and the single indexes the policy excludes that
 * its filter would have used (an index miss: the documents were read instead).
 */
function indexUtilization(m) {
  const single = spec => ({
    FilterExpression: "", IndexSpec: spec, FilterPreciseSet: true, IndexPreciseSet: true, IndexImpactScore: "High"
  });
  const info = {
    UtilizedSingleIndexes: m.utilized.map(single),
    PotentialSingleIndexes: m.potential.map(single),
    UtilizedCompositeIndexes: m.compositeUsed.map(specs => ({ IndexSpecs: specs, IndexPreciseSet: true, IndexImpactScore: "High" })),
    PotentialCompositeIndexes: []
  };
  return Buffer.from(JSON.stringify(info)).toString("base64");
}

async function handleReadFeed(req, res, store) {
  const result = await acrossRanges(req, res, store, { query: "SELECT * FROM c" });
  sendFeed(req, res, store, result);
}

/**
 * A query (or the read feed) over what the request is scoped to. As the gateway serves one
 * over several physical partitions that needs no merging: one range per answer, in EPK
 * order, each answer's continuation naming the EPK span it is in and the place in it, the
 * next span once one is done (an empty range is an empty answer that leads on). A span
 * survives a split of its range: its documents are read by EPK, whichever ranges hold them
 * now. A continuation taken when the container had one range goes on over the whole
 * container.
 */
async function acrossRanges(req, res, store, body) {
  const scope = requestScope(req, store);
  const owner = store.collection;
  let position = null;
  const parsed = parseContinuation(header(req, "x-ms-continuation"));
  const unscoped = scope.pk === null && scope.range === null && scope.epk === null;
  if (parsed && parsed.span) position = parsed;
  else if (parsed && unscoped && scope.ranges.length > 1) {
    position = { span: ["", "FF"], inner: parsed }; // taken before the container had several
  }
  if (position === null && (!unscoped || scope.ranges.length < 2)) {
    return queryDocuments(store, body, req, scope, null, parsed);
  }
  const live = liveRanges(owner);
  const [min, max] = position ? position.span : [live[0].minInclusive, live[0].maxExclusive];
  const page = await queryDocuments(store, body, req, scope, [min, max], position ? position.inner || null : null);
  let continuation = null;
  if (page.continuation) continuation = { span: [min, max], inner: page.continuation };
  else {
    const after = live.find(r => r.minInclusive === max);
    if (after) continuation = { span: [after.minInclusive, after.maxExclusive], inner: null };
  }
  answerFor(res, owner, live.filter(r => r.minInclusive >= min && r.maxExclusive <= max));
  return { ...page, continuation };
}

/** POST .../docs with x-ms-cosmos-is-query-plan-request: the query's plan (queryplan.js). */
async function handleQueryPlan(req, res) {
  let body = await readJson(req);
  if (typeof body === "string") body = { query: body };
  if (!body || typeof body.query !== "string") throw badRequest("missing query");
  send(req, res, 200, queryPlan(body.query, body.parameters, badRequest));
}

/**
 * Local only: GET /_emulators/queries gives the page budget ({"budgetMs": 1000, "scoped": [...]});
 * PUT sets it (tests make pages end sooner: a partial page, as when a query's budget runs out
 * in Azure); DELETE puts the default back. With "database" (and "container", of that
 * database) in the body, PUT sets the budget of the queries on that database's containers
 * (that container) only, and DELETE with them removes it (the endpoint's applies again): two
 * tests on one endpoint at once each set their own database's. "scoped" lists the budgets so
 * set ({database, container, budgetMs}); a container's wins over its database's.
 */
async function handleQueryControl(req, res, segs) {
  if (segs[0] !== "_emulators" || segs[1] !== "queries" || segs.length !== 2) return false;
  let scope = null;
  if (req.method === "DELETE") {
    const body = await readJson(req);
    scope = body ? controlScope(body) : null;
    setBudget(null, scope);
  } else if (req.method === "PUT" || req.method === "POST") {
    const body = (await readJson(req)) || {};
    const ms = body.budgetMs;
    if (ms !== null && !(Number.isInteger(ms) && ms >= 0)) throw badRequest("budgetMs: a number of milliseconds (>= 0) or null");
    scope = controlScope(body);
    setBudget(ms, scope);
  } else if (req.method !== "GET") throw new CosmosError(405, "MethodNotAllowed", "Method not allowed");
  if (scope && scope.database !== null) send(req, res, 200, { budgetMs: budget(scope), ...scope });
  else send(req, res, 200, { budgetMs: budget(), scoped: scopedBudgetList() });
  return true;
}

module.exports = { handleQuery, handleQueryPlan, handleReadFeed, handleQueryControl };
