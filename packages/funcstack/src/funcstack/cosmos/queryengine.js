"use strict";
/*
 * The query engine's part of a query on the local Cosmos DB endpoint (queryrun.js decides
 * which documents are read, from the indexes; this evaluates the query on them): the package's
 * engine (@zeit/cosmosdb-query, its parser with a results cache: sqlparser.js) with the
 * service's semantics (sqlsemantics.js), a chunk of at most CHUNK documents at a time (its FROM
 * is quadratic in what it is given at once). Pure: a task in, its result out, no state but the
 * prepared queries, so it runs in the endpoint's query threads (queryworker.js) as well as in
 * its main thread; a task's documents are their JSON text, parsed here.
 *
 * A task (`evaluate`), one of:
 *   - {kind: "rows", text, chunks, ...}: a page's rows, chunk after chunk, until the page is
 *     full (its size `max`, TOP, 4 MB without a size) or the engine stopped inside a chunk
 *     (its continuation: the document it stopped before, and how many of its rows it gave);
 *   - {kind: "aggregate", parts: [{name, text}], chunks}: each `SELECT VALUE AGG(x) ...` of
 *     `parts` over every chunk, the chunks' partial results combined;
 *   - {kind: "whole", text, chunks}: the query over every document at once (aggregates in an
 *     object).
 * Every task has the query's `parameters` and the container's UDFs (`udfs`: id -> source). A
 * refusal of the engine is the result {error: message} (the query's 400).
 */

const { queryEngine } = require("./sqlparser");
const { analyze } = require("./queryindex");
const { withMarkers, serviceSemantics, FUNCTIONS } = require("./sqlsemantics");
const { compareValues } = require("./sortedkeys");
const { valueAt } = require("./pathindexes");

/** Documents given to the engine at once (its FROM is quadratic in them). */
const CHUNK = 32;
const PREPARED_MAX = 256;
/** A page without a page size ends past this much JSON, as the service's pages do (4 MB). */
const PAGE_BYTES = 4 * 1024 * 1024;

/** A query the engine or the service refuses: its message is the answer's (400). */
class Refused extends Error {}

const prepared = new Map();

/**
 * The engine's code for the queries every run of the stack sends, by text: the read feed's
 * (query.js handleReadFeed: GET .../docs, what an SDK's read_all_items sends) and those of the
 * lease stores funcstack's Functions host and cosmos-changefeed keep. What `prepare` generates
 * for each (its generator, Babel, on the pinned versions: tests/cosmos/test_cosmos_internals.py
 * checks it is), taken as another thread's code is. An endpoint whose only queries are these
 * never loads the code generator (about 0.07 s of CPU).
 */
const PREBUILT = new Map([
  ["SELECT * FROM c",
    "($a, $b, $c, $h, udf, $p, $maxItemCount, $continuation, $compositeIndexes, $_, $__) => {\n" +
    "  return $h.paginate($h.sort($c.reduce(($, c) => typeof c !== \"undefined\" ? [...$, {\n" +
    "    c: c\n" +
    "  }] : $, []), $ => $.c._rid).map(({\n" +
    "    c\n" +
    "  }) => [c, {\n" +
    "    c\n" +
    "  }]), $maxItemCount, $continuation, $ => $.c._rid);\n" +
    "}"],
  // the Functions host's Cosmos DB trigger: a lease by id (functions_host/_cosmos_trigger), its
  // parameter renamed as query.js renames them
  ["SELECT c.id FROM c WHERE c.id = @p__id",
    "($a, $b, $c, $h, udf, $p, $maxItemCount, $continuation, $compositeIndexes, $_, $__) => {\n" +
    "  return $h.paginate($h.sort($c.reduce(($, c) => typeof c !== \"undefined\" ? [...$, {\n" +
    "    c: c\n" +
    "  }] : $, []).filter(({\n" +
    "    c\n" +
    "  }) => udf.__funcstack_eq(($_ = c, typeof $_ === \"object\" && $_ ? $_.id : undefined), $p.p__id) === true)" +
    ", $ => $.c._rid).map(({\n" +
    "    c\n" +
    "  }) => [{\n" +
    "    id: ($_ = c, typeof $_ === \"object\" && $_ ? $_.id : undefined)\n" +
    "  }, {\n" +
    "    c\n" +
    "  }]), $maxItemCount, $continuation, $ => $.c._rid);\n" +
    "}"],
  // cosmos-changefeed's lease store: the leases of a processor (its LIST_QUERY), likewise
  ["SELECT * FROM c WHERE STARTSWITH(c.id, @p__prefix)",
    "($a, $b, $c, $h, udf, $p, $maxItemCount, $continuation, $compositeIndexes, $_, $__) => {\n" +
    "  return $h.paginate($h.sort($c.reduce(($, c) => typeof c !== \"undefined\" ? [...$, {\n" +
    "    c: c\n" +
    "  }] : $, []).filter(({\n" +
    "    c\n" +
    "  }) => $b.STARTSWITH(($_ = c, typeof $_ === \"object\" && $_ ? $_.id : undefined), $p.p__prefix) === true)" +
    ", $ => $.c._rid).map(({\n" +
    "    c\n" +
    "  }) => [c, {\n" +
    "    c\n" +
    "  }]), $maxItemCount, $continuation, $ => $.c._rid);\n" +
    "}"],
]);

/**
 * Parse, analyse and give the service's semantics to a query (kept, by text). `code`: the
 * engine's code for it as another thread's `prepare` generated it (`codeOf`), taken instead of
 * generating it here, so that a query thread never loads the engine's code generator
 * (sqlparser.js); the same text, parsed and changed the same way, gives the same code. A query
 * of PREBUILT is given its code there.
 */
function prepare(text, code = PREBUILT.get(text)) {
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
    throw new Refused(err.message);
  }
  const analysis = analyze(query.ast);
  // a UDF is user code: it may change the documents it is given (they are not shared then);
  // read before serviceSemantics, whose own functions are called as UDFs
  const udf = JSON.stringify(query.ast).includes('"udf":true');
  try {
    serviceSemantics(query.ast);
    query.ast.body.top = null; // TOP applies to the rows answered (here), not to the documents read
    if (code !== undefined) query._code = code; // the package's Query keeps its code there (internals.js)
    void query.code; // the engine's code now: its refusals are the query's 400
  } catch (err) {
    throw new Refused(err.message);
  }
  // rows that are stored documents (`SELECT *`, `SELECT VALUE c`) hold no infinity or NaN:
  // `evaluate` does not look
  const select = query.ast.body.select;
  const stored = Boolean(select["*"]) || Boolean(select.value && select.value.type === "identifier");
  p = { query, analysis, text, udf, stored };
  prepared.set(text, p);
  if (prepared.size > PREPARED_MAX) prepared.delete(prepared.keys().next().value);
  return p;
}

/** The engine's code for each query of a task, by text (what `prepare` takes as `code`). */
function codeOf(task) {
  const texts = task.text !== undefined ? [task.text] : task.parts.map(part => part.text);
  return Object.fromEntries(texts.map(text => [text, prepare(text).query.code]));
}

/** A task's query prepared, with the code the task was given for it, if any. */
function preparedFor(task, text) {
  return prepare(text, task.codes ? task.codes[text] : undefined);
}

/**
 * The engine's options: the parameters, our functions beside the container's UDFs, and the
 * composite indexes the engine checks an ORDER BY of several items against (ours, the
 * policy's, checked in querywalk.js `orderOf`, with the hidden _rid order sqlsemantics.js
 * adds).
 */
function engineOptions(analysis, parameters, udf) {
  let compositeIndexes;
  if (analysis.orderBy) {
    const dir = analysis.orderBy[0].desc ? "descending" : "ascending";
    const items = analysis.orderBy.map(o => ({
      path: `/${(o.segs || []).join("/")}`, order: o.desc ? "descending" : "ascending"
    }));
    compositeIndexes = [items, [...items, { path: "/_rid", order: dir }]];
  }
  return { parameters: parameters || [], udf: { ...udf, ...FUNCTIONS }, compositeIndexes };
}

const defined = new Map();

/**
 * The container's UDFs from their source (`udfs`: id -> source), as the package defines them
 * (its user-defined-functions.js: the body evaluated as an expression in strict mode).
 */
function udfsOf(udfs) {
  const out = {};
  for (const [id, source] of Object.entries(udfs || {})) {
    let fn = defined.get(source);
    if (!fn) {
      fn = new Function(`"use strict";return (${source})`)(); // eslint-disable-line no-new-func
      defined.set(source, fn);
      if (defined.size > PREPARED_MAX) defined.delete(defined.keys().next().value);
    }
    out[id] = fn;
  }
  return out;
}

/** A document's position in a query's order (querywalk.js): its values there, its _rid. */
function positionOf(order, doc) {
  return { vals: order ? order.items.map(o => valueAt(doc, o.segs)) : [], rid: doc._rid };
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

/** The documents of a chunk (their JSON text, or objects already) and their JSON's size. */
function parsed(chunk, measure) {
  let bytes = 0;
  const docs = chunk.map(d => {
    if (typeof d !== "string") {
      if (measure) bytes += Buffer.byteLength(JSON.stringify(d));
      return d;
    }
    if (measure) bytes += Buffer.byteLength(d);
    return JSON.parse(d);
  });
  return { docs, bytes };
}

function exec(p, docs, options) {
  try {
    return p.query.exec(docs, options);
  } catch (err) {
    throw new Refused(err.message);
  }
}

/**
 * A page's rows from `chunks`, as queryrun.js's runPage takes them: `max` rows at most in the
 * page (`have` of them already), `top` (or null) of the query at most (`produced` of them
 * already, in earlier pages too), `token` the engine's continuation inside the first chunk's
 * document, `bytes` of rows so far. {rows, produced, bytes, consumed (chunks evaluated in
 * whole), stop (the page is full), cut ({pos, t}: the engine stopped inside chunk
 * `consumed`), retrieved, retrievedBytes}.
 */
function rows(task) {
  const p = preparedFor(task, task.text);
  const options = engineOptions(p.analysis, task.parameters, udfsOf(task.udfs));
  const { max, top, have, order } = task;
  let { produced, token, bytes } = task;
  const out = [];
  let retrieved = 0;
  let retrievedBytes = 0;
  const result = (consumed, stop, cut = null) => ({
    rows: out, produced, bytes, consumed, stop, cut, retrieved, retrievedBytes
  });
  for (let i = 0; i < task.chunks.length; i += 1) {
    const left = Math.min(max - have - out.length, top === null ? Infinity : top - produced);
    if (left <= 0) return result(i, true);
    if (task.chunks[i].length === 0) continue;
    const { docs, bytes: read } = parsed(task.chunks[i], task.measure);
    retrieved += docs.length;
    retrievedBytes += read;
    const r = exec(p, docs, {
      ...options,
      maxItemCount: Number.isFinite(left) ? left : undefined,
      continuation: token ? { token } : undefined
    });
    token = null;
    for (const row of r.result) out.push(row);
    produced += r.result.length;
    if (max > 100) bytes += JSON.stringify(r.result).length; // only pages that may grow large
    if (r.continuation) {
      // the engine stopped before a document (its _rid; SRC: how many of its rows were given)
      const engine = decodeEngineToken(r.continuation.token);
      const doc = docs.find(d => d._rid === engine.RID);
      return result(i, true, { pos: positionOf(order, doc), t: engine.SRC ? r.continuation.token : null });
    }
    if (have + out.length >= max || (top !== null && produced >= top) || bytes >= PAGE_BYTES) {
      return result(i + 1, true);
    }
  }
  return result(task.chunks.length, false);
}

/** The aggregates of `parts` over every chunk: {values, retrieved, retrievedBytes}. */
function aggregate(task) {
  const parts = task.parts.map(part => ({ ...part, p: preparedFor(task, part.text) }));
  const options = engineOptions(parts[0].p.analysis, task.parameters, udfsOf(task.udfs));
  const values = parts.map(part => (part.name === "COUNT" || part.name === "SUM" ? 0 : undefined));
  let retrieved = 0;
  let retrievedBytes = 0;
  for (const chunk of task.chunks) {
    if (chunk.length === 0) continue;
    const { docs, bytes } = parsed(chunk, task.measure);
    retrieved += docs.length;
    retrievedBytes += bytes;
    parts.forEach((part, i) => {
      const r = exec(part.p, docs, options);
      values[i] = combined(part.name, values[i], r.result.length ? r.result[0] : undefined);
    });
  }
  return { values, retrieved, retrievedBytes };
}

/** The query over every document of every chunk at once: {result, retrieved, retrievedBytes}. */
function whole(task) {
  const p = preparedFor(task, task.text);
  const docs = [];
  let retrievedBytes = 0;
  for (const chunk of task.chunks) {
    const { docs: some, bytes } = parsed(chunk, task.measure);
    for (const d of some) docs.push(d);
    retrievedBytes += bytes;
  }
  const r = exec(p, docs, engineOptions(p.analysis, task.parameters, udfsOf(task.udfs)));
  return { result: r.result, retrieved: docs.length, retrievedBytes };
}

const KINDS = { rows, aggregate, whole };

/** Whether a task's query calls a UDF (user code, which may change the documents it gets). */
function callsUdf(task) {
  const texts = task.text !== undefined ? [task.text] : task.parts.map(part => part.text);
  return texts.some(text => prepare(text).udf);
}

/** Whether a value holds no number JSON cannot carry (an infinity or NaN). */
function finite(value) {
  if (typeof value === "number") return Number.isFinite(value);
  if (Array.isArray(value)) return value.every(finite);
  if (value !== null && typeof value === "object") {
    for (const key in value) if (!finite(value[key])) return false;
  }
  return true;
}

/**
 * What the service answers (400, sub-status 4001) to a query whose results hold an infinity or
 * NaN (a division by zero), which JSON cannot carry (JSON.stringify would make it null).
 */
const NOT_JSON = "The response content contains a numeric value that cannot be represented in JSON " +
  "(e.g. Infinity and NaN).";
/** A row that held an infinity or NaN, in its place (rows cross threads as JSON). */
const NOT_JSON_ROW = Object.freeze({ __funcstack_not_json__: true });

/** Whether rows answered hold an infinity or NaN (or a row marked for one): the query's 400. */
function holdsNotJson(rows) {
  return rows.some(r => !finite(r) || (r !== null && typeof r === "object" && r.__funcstack_not_json__ === true));
}

/**
 * A task's result, or {error} when the engine refuses the query. A row holding an infinity or
 * NaN is answered as NOT_JSON_ROW, with `notJson` set: the query is refused (query.js) if such
 * a row is among those answered once TOP, DISTINCT and OFFSET LIMIT have cut them (the service
 * refuses what it would send). An aggregate's partial values keep theirs (they are cloned, not
 * sent as JSON).
 */
function evaluate(task) {
  let result;
  try {
    result = KINDS[task.kind](task);
  } catch (err) {
    if (err instanceof Refused) return { error: err.message };
    throw err;
  }
  if (task.text !== undefined && prepare(task.text).stored) return result;
  for (const key of ["rows", "result"]) {
    if (Array.isArray(result[key]) && !finite(result[key])) {
      result[key] = result[key].map(row => (finite(row) ? row : NOT_JSON_ROW));
      result.notJson = true;
    }
  }
  return result;
}

module.exports = {
  PREBUILT,
  prepare,
  codeOf,
  callsUdf,
  engineOptions,
  evaluate,
  combined,
  positionOf,
  Refused,
  NOT_JSON,
  holdsNotJson,
  CHUNK,
  PAGE_BYTES
};
