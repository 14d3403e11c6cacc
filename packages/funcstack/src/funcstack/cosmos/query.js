"use strict";
/*
 * Queries and the read feed of the local Cosmos DB endpoint (server.js), on the package's
 * (@vercel/cosmosdb-server 1.0.1) SQL engine, answered as the service's gateway answers them:
 *
 *   - scoped by the partition key header or a feed range (partitions.js);
 *   - a cross-partition query the gateway cannot serve (ORDER BY, TOP, OFFSET/LIMIT,
 *     DISTINCT, aggregates) is refused with 400 / sub-status 1004 and its query plan, which
 *     the SDK also fetches on its own (x-ms-cosmos-is-query-plan-request, queryplan.js), then
 *     sends the rewritten query per range (x-ms-documentdb-partitionkeyrangeid) and merges;
 *     one it can serve goes over several physical partitions one range per answer
 *     (acrossRanges), as the gateway does;
 *   - added to the engine: DISTINCT (by value), OFFSET/LIMIT, keyword-named properties,
 *     parameters of any name, composite indexes in reverse order, the plan's per-range
 *     aggregates, query metrics (x-ms-documentdb-populatequerymetrics);
 *   - pages of `x-ms-max-item-count` with `x-ms-continuation`; a service-format token (of
 *     another container) starts from the beginning.
 */

const { engineShape, needsPlan, queryPlan, rewrittenAggregate } = require("./queryplan");
const { CosmosError, CROSS_PARTITION_QUERY_NOT_SERVABLE, badRequest, send } = require("./responses");
const { readJson, header, isTrue, headerPartitionKey } = require("./requests");
const { answerFor, docEpk, requestScope, scopedDocs } = require("./partitions");
const { liveRanges } = require("./ranges");

function queryDocuments(store, docs, body, req, contRaw = header(req, "x-ms-continuation")) {
  const maxItemCount = parseInt(header(req, "x-ms-max-item-count") || "-1", 10);
  let continuation = null;
  if (contRaw && /^-RID:/.test(contRaw)) {
    // a service-format token (its resource id names another container's pages): the service
    // does not resume from a token that is not for this query, it starts from the beginning
    continuation = null;
  } else if (contRaw) {
    try {
      continuation = JSON.parse(contRaw);
    } catch (e) {
      throw badRequest("Invalid continuation token");
    }
  }
  const colData = store.colData;
  // the service serves an ORDER BY from a composite index in its own order or exactly
  // reversed; the package's engine accepts only the declared order
  // (an order left out is ascending)
  const declared = (((colData.indexingPolicy || {}).compositeIndexes) || []).map(paths =>
    paths.map(index => ({ ...index, order: String(index.order || "ascending").toLowerCase() })));
  const reversed = order => (order === "descending" ? "ascending" : "descending");
  const compositeIndexes = declared.concat(
    declared.map(paths => paths.map(index => ({ ...index, order: reversed(index.order) }))));
  const { query: text, parameters } = renameParameters(body.query, body.parameters || []);
  const options = { parameters, udf: store.udfs(), compositeIndexes };
  const aggregate = rewrittenAggregate(text);
  if (aggregate) return { result: [rangeAggregate(store, docs, aggregate, options)], continuation: null };
  const shape = engineShape(text, parameters, badRequest);
  if (headerPartitionKey(req) === null && shape.aggregateWithoutValue) {
    throw badRequest("Cross partition query only supports 'VALUE <AggregateFunc>' for aggregates.");
  }
  const q = store.compile(shape.query);
  try {
    if (!shape.distinct && shape.offset === null) {
      return q.exec(docs, {
        ...options,
        maxItemCount: maxItemCount > 0 ? maxItemCount : undefined,
        continuation
      });
    }
    // DISTINCT and OFFSET/LIMIT, which the package's engine does not parse, are applied to
    // the whole (ordered) result here; pages are cut from it with a continuation of our own.
    let rows = q.exec(docs, options).result;
    if (shape.distinct) {
      const seen = new Set();
      rows = rows.filter(row => {
        const key = canonicalJson(row);
        if (seen.has(key)) return false;
        seen.add(key);
        return true;
      });
    }
    if (shape.offset !== null) rows = rows.slice(shape.offset, shape.offset + shape.limit);
    const start = continuation && Number.isInteger(continuation.local) ? continuation.local : 0;
    const end = maxItemCount > 0 ? start + maxItemCount : rows.length;
    return { result: rows.slice(start, end), continuation: end < rows.length ? { local: end } : null };
  } catch (err) {
    throw badRequest(err.message);
  }
}

/**
 * One partition key range's part of a plan's aggregate (`SELECT VALUE [{"item": AGG(x)}] ...`):
 * `[{"item": value}]`, the value left out where the aggregate has none (MIN/MAX/AVG over no
 * documents), AVG as its sum and count, for the SDK to combine across ranges.
 */
function rangeAggregate(store, docs, aggregate, options) {
  const run = name => {
    const text = `SELECT VALUE ${name}(${aggregate.argument}) ${aggregate.source}`;
    try {
      return store.compile(text).exec(docs, options).result[0];
    } catch (err) {
      throw badRequest(err.message);
    }
  };
  if (aggregate.name !== "avg") return [{ item: run(aggregate.name.toUpperCase()) }];
  return [{ item: { sum: run("SUM"), count: run("COUNT") } }];
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
  let result;
  if (headerPartitionKey(req) === null && header(req, "x-ms-documentdb-partitionkeyrangeid") === undefined &&
      needsPlan(body.query, body.parameters, badRequest)) {
    // as the service's gateway: the SDK is to fetch the plan and query every range itself
    const err = new CosmosError(400, "BadRequest",
      "Cross partition query with TOP/ORDER BY/OFFSET LIMIT/DISTINCT/aggregates is not servable by the gateway.",
      CROSS_PARTITION_QUERY_NOT_SERVABLE);
    err.additionalErrorInfo = JSON.stringify(queryPlan(body.query, body.parameters, badRequest));
    throw err;
  }
  const started = process.hrtime.bigint();
  let docs;
  try {
    const serial = acrossRanges(req, res, store, body);
    if (serial) ({ docs, result } = serial);
    else {
      docs = scopedDocs(req, store);
      result = queryDocuments(store, docs, body, req);
    }
  } catch (err) {
    if (err instanceof CosmosError) throw err;
    throw badRequest(err.message);
  }
  const extra = {};
  if (isTrue(req, "x-ms-documentdb-populatequerymetrics")) {
    extra["x-ms-documentdb-query-metrics"] = queryMetrics(docs, result.result, started);
  }
  sendFeed(req, res, store, result, extra);
}

/**
 * x-ms-documentdb-query-metrics with this endpoint's own figures: it scans every document in
 * scope (no index: indexLookupTimeInMs 0, indexUtilizationRatio 0) and times the execution.
 */
function queryMetrics(scanned, output, started) {
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  const size = rows => rows.reduce((n, r) => n + Buffer.byteLength(JSON.stringify(r === undefined ? null : r)), 0);
  return [
    `totalExecutionTimeInMs=${ms.toFixed(2)}`,
    "queryCompileTimeInMs=0.00",
    "queryLogicalPlanBuildTimeInMs=0.00",
    "queryPhysicalPlanBuildTimeInMs=0.00",
    "queryOptimizationTimeInMs=0.00",
    `VMExecutionTimeInMs=${ms.toFixed(2)}`,
    "indexLookupTimeInMs=0.00",
    "documentLoadTimeInMs=0.00",
    "systemFunctionExecuteTimeInMs=0.00",
    "userFunctionExecuteTimeInMs=0.00",
    `retrievedDocumentCount=${scanned.length}`,
    `retrievedDocumentSize=${size(scanned)}`,
    `outputDocumentCount=${output.length}`,
    `outputDocumentSize=${size(output)}`,
    "writeOutputTimeInMs=0.00",
    "indexUtilizationRatio=0.00"
  ].join(";");
}

function handleReadFeed(req, res, store) {
  const body = { query: "SELECT * FROM c" };
  const serial = acrossRanges(req, res, store, body);
  const result = serial ? serial.result : queryDocuments(store, scopedDocs(req, store), body, req);
  sendFeed(req, res, store, result);
}

/**
 * As the gateway serves a query (or the read feed) over several physical partitions that
 * needs no merging: one range per answer, in EPK order, each answer's continuation naming the
 * EPK span it is in and the place in it, the next span once one is done (an empty range is an
 * empty answer that leads on). A span survives a split of its range: its documents are read
 * by EPK, whichever ranges hold them now. A continuation of the engine's own (a container that
 * had one range when it was taken) goes on over the whole container. Null when the request is
 * scoped (a partition key, a range, a feed range) or the container has one range.
 */
function acrossRanges(req, res, store, body) {
  const scope = requestScope(req, store);
  const owner = store.collection;
  let position = null;
  const raw = header(req, "x-ms-continuation");
  if (raw && !/^-RID:/.test(raw)) {
    try {
      const parsed = JSON.parse(raw);
      if (parsed && parsed.span) position = parsed;
      else if (scope.pk === null && scope.range === null && scope.epk === null) {
        position = { span: ["", "FF"], inner: parsed }; // taken before the container had several
      }
    } catch (e) {
      throw badRequest("Invalid continuation token");
    }
  }
  if (position === null && (scope.pk !== null || scope.range !== null || scope.epk !== null ||
      scope.ranges.length < 2)) return null;
  const live = liveRanges(owner);
  const [min, max] = position ? position.span : [live[0].minInclusive, live[0].maxExclusive];
  const colData = store.colData;
  const docs = store.all().filter(d => {
    const e = docEpk(colData, d);
    return e >= min && e < max;
  });
  const page = queryDocuments(store, docs, body, req, position && position.inner ? JSON.stringify(position.inner) : null);
  let continuation = null;
  if (page.continuation) continuation = { span: [min, max], inner: page.continuation };
  else {
    const after = live.find(r => r.minInclusive === max);
    if (after) continuation = { span: [after.minInclusive, after.maxExclusive], inner: null };
  }
  answerFor(res, live.filter(r => r.minInclusive >= min && r.maxExclusive <= max));
  return { docs, result: { result: page.result, continuation } };
}

/** POST .../docs with x-ms-cosmos-is-query-plan-request: the query's plan (queryplan.js). */
async function handleQueryPlan(req, res) {
  let body = await readJson(req);
  if (typeof body === "string") body = { query: body };
  if (!body || typeof body.query !== "string") throw badRequest("missing query");
  send(req, res, 200, queryPlan(body.query, body.parameters, badRequest));
}

module.exports = { handleQuery, handleQueryPlan, handleReadFeed };
