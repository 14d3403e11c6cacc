"use strict";

/**
 * Query plans, as the service's gateway serves them.
 *
 * A cross-partition query that needs merging on the client (ORDER BY, TOP, OFFSET/LIMIT,
 * DISTINCT, aggregates) is not served by the gateway: it answers 400 with sub-status 1004,
 * the SDK asks for the query's plan (`x-ms-cosmos-is-query-plan-request`), sends the plan's
 * rewritten query to every partition key range and merges the results itself (ordering,
 * TOP/OFFSET/LIMIT, DISTINCT, aggregates). The local endpoint does the same, so the SDK's
 * own merge pipeline runs locally as it does against Azure.
 *
 * The rewritten queries use the service's shapes: ORDER BY becomes
 * `SELECT r._rid, [{"item": e1}, ...] AS orderByItems, <projection> AS payload ...` and an
 * aggregate `SELECT VALUE [{"item": AGG(x)}] ...` (AVG: `{"sum": SUM(x), "count": COUNT(x)}`),
 * which `rewrittenAggregate` recognizes when a range query comes back with it.
 */

const AGGREGATES = { count: "Count", sum: "Sum", min: "Min", max: "Max", avg: "Average" };
const KEYWORDS = /^(select|from|where|order\s+by|group\s+by|offset|limit|join)\b/i;

/**
 * Calls `visit(i, depth)` for each index of `text` outside string literals, with the bracket
 * depth once that character is taken into account; `visit` returning false stops the scan.
 */
function scan(text, visit) {
  let depth = 0;
  for (let i = 0; i < text.length; i += 1) {
    const ch = text[i];
    if (ch === "'" || ch === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== ch) j += text[j] === "\\" ? 2 : 1;
      i = j;
      continue;
    }
    if (ch === "(" || ch === "[" || ch === "{") depth += 1;
    else if (ch === ")" || ch === "]" || ch === "}") depth -= 1;
    if (visit(i, depth) === false) return;
  }
}

/** Top-level clause keywords (`select`, `from`, `where`, `order by`, ...) and where they start. */
function clauses(text) {
  const found = [];
  scan(text, (i, depth) => {
    if (depth !== 0 || (i > 0 && /[\w.@$]/.test(text[i - 1]))) return;
    const m = KEYWORDS.exec(text.slice(i));
    if (m) found.push({ keyword: m[1].toLowerCase().replace(/\s+/g, " "), index: i, end: i + m[0].length });
  });
  return found;
}

/** `text` split at top-level commas. */
function splitTopLevel(text) {
  const parts = [];
  let start = 0;
  scan(text, (i, depth) => {
    if (depth === 0 && text[i] === ",") {
      parts.push(text.slice(start, i).trim());
      start = i + 1;
    }
  });
  parts.push(text.slice(start).trim());
  return parts.filter(p => p !== "");
}

/** Positions of aggregate calls outside any brackets of `text`. */
function topLevelAggregates(text) {
  const found = [];
  scan(text, (i, depth) => {
    if (depth !== 0 || (i > 0 && /[\w.$]/.test(text[i - 1]))) return;
    const m = /^(count|sum|min|max|avg)\s*\(/i.exec(text.slice(i));
    if (m) found.push({ name: m[1].toLowerCase(), index: i, open: i + m[0].length - 1 });
  });
  return found;
}

/** Index of the bracket closing the one at `open` (-1 if none). */
function closing(text, open) {
  let end = -1;
  scan(text.slice(open), (i, depth) => {
    if (depth !== 0) return true;
    end = open + i;
    return false;
  });
  return end;
}

function intValue(token, parameters, what, badRequest) {
  if (/^\d+$/.test(token)) return parseInt(token, 10);
  const p = (Array.isArray(parameters) ? parameters : []).find(x => x && x.name === token);
  if (!p || !Number.isInteger(p.value) || p.value < 0) {
    throw badRequest(`${what} ${token} must be a non-negative integer.`);
  }
  return p.value;
}

/** The parts of a SELECT the plan needs, or a 400 for what the local endpoint cannot plan. */
function parse(text, parameters, badRequest) {
  const found = clauses(text);
  const select = found[0];
  if (!select || select.keyword !== "select" || text.slice(0, select.index).trim() !== "") {
    throw badRequest("Syntax error: a query starts with SELECT.");
  }
  const from = found.find(c => c.keyword === "from");
  const orderBy = found.find(c => c.keyword === "order by");
  const offset = found.find(c => c.keyword === "offset");
  const limit = found.find(c => c.keyword === "limit");
  if (found.some(c => c.keyword === "group by")) {
    throw badRequest("GROUP BY is not supported by the local endpoint.");
  }
  let head = text.slice(select.end, from ? from.index : text.length).trim();
  const shape = { distinct: false, top: null, value: false, composed: false };
  let m = /^distinct\s+/i.exec(head);
  if (m) {
    shape.distinct = true;
    head = head.slice(m[0].length);
  }
  m = /^top\s+(@\w+|\d+)\s+/i.exec(head);
  if (m) {
    shape.top = intValue(m[1], parameters, "TOP", badRequest);
    head = head.slice(m[0].length);
  }
  m = /^value\s+/i.exec(head);
  if (m) {
    shape.value = true;
    head = head.slice(m[0].length);
  }
  shape.projection = head;
  const tailStart = [orderBy, offset].filter(Boolean).map(c => c.index);
  shape.source = from ? text.slice(from.index, tailStart.length ? Math.min(...tailStart) : text.length).trim() : "";
  shape.orderBy = [];
  if (orderBy) {
    const end = offset ? offset.index : text.length;
    shape.orderBy = splitTopLevel(text.slice(orderBy.end, end)).map(item => {
      const dir = /\s+(asc|desc)$/i.exec(item);
      return {
        expression: dir ? item.slice(0, dir.index).trim() : item,
        order: dir && dir[1].toLowerCase() === "desc" ? "Descending" : "Ascending"
      };
    });
  }
  shape.offset = null;
  shape.limit = null;
  if (offset) {
    if (!limit) throw badRequest("Syntax error: OFFSET without LIMIT.");
    shape.offset = intValue(text.slice(offset.end, limit.index).trim(), parameters, "OFFSET", badRequest);
    shape.limit = intValue(text.slice(limit.end).trim(), parameters, "LIMIT", badRequest);
  }
  shape.aggregates = [];
  for (const item of shape.value ? [shape.projection] : splitTopLevel(shape.projection)) {
    const expression = item.replace(/\s+as\s+[\w$]+$/i, "").trim();
    for (const agg of topLevelAggregates(expression)) {
      if (closing(expression, agg.open) < 0) throw badRequest("Syntax error: unbalanced brackets.");
      if (agg.index !== 0 || closing(expression, agg.open) !== expression.length - 1) {
        shape.composed = true; // an aggregate inside a larger expression: no plan can merge it
        continue;
      }
      shape.aggregates.push({ name: agg.name, argument: expression.slice(agg.open + 1, -1).trim() });
    }
  }
  // what the package's engine runs: it parses neither DISTINCT nor OFFSET/LIMIT
  let engineText = offset ? text.slice(0, offset.index) : text;
  if (shape.distinct) engineText = engineText.replace(/^(\s*select\s+)distinct\s+/i, "$1");
  shape.engineText = engineText;
  return shape;
}

/**
 * A query as the local engine runs it: its text without DISTINCT and OFFSET/LIMIT (applied
 * by the caller), its TOP (a number, its parameter's value, or null) and whether it
 * aggregates without VALUE. 400 for GROUP BY and bad syntax.
 */
function engineShape(text, parameters, badRequest) {
  const s = parse(text, parameters, badRequest);
  return {
    query: s.engineText,
    distinct: s.distinct,
    top: s.top,
    offset: s.offset,
    limit: s.limit,
    aggregateWithoutValue: !s.value && (s.aggregates.length > 0 || s.composed)
  };
}

/**
 * `SELECT [TOP n] VALUE AGG(x) <source>` as {name, argument, source} (lower-case name), else null:
 * what the endpoint computes from partial results (queryrun.js).
 */
function valueAggregate(text, parameters, badRequest) {
  const s = parse(text, parameters, badRequest);
  if (!s.value || s.aggregates.length !== 1 || s.composed || s.distinct || s.offset !== null || s.orderBy.length) {
    return null;
  }
  return { name: s.aggregates[0].name, argument: s.aggregates[0].argument, source: s.source };
}

/** The alias the query's FROM gives the documents (`FROM c`, `FROM root r`, `FROM root AS r`). */
function rootAlias(source) {
  const m = /^from\s+([\w$]+)(?:\s+(?:as\s+)?([\w$]+))?/i.exec(source);
  if (!m) return "root";
  const alias = m[2] && !/^(where|join|order|offset|in)$/i.test(m[2]) ? m[2] : m[1];
  return alias;
}

/** A SELECT list as one object expression (`c.a, c.b AS x` → `{"a": c.a, "x": c.b}`). */
function projectionObject(projection, alias) {
  if (projection.trim() === "*") return alias;
  let unnamed = 0;
  const fields = splitTopLevel(projection).map(item => {
    const as = /\s+as\s+([\w$]+)$/i.exec(item);
    const expression = as ? item.slice(0, as.index).trim() : item;
    let name = as ? as[1] : null;
    if (!name) {
      // a property by its name, the FROM alias by its own, anything else $1, $2, ...
      const prop = /(?:\.([\w$]+)|\[\s*"([^"]+)"\s*\])$/.exec(expression);
      const own = expression === alias ? alias : null;
      name = prop ? (prop[1] || prop[2]) : own || `$${(unnamed += 1)}`;
    }
    return `${JSON.stringify(name)}: ${expression}`;
  });
  return `{${fields.join(", ")}}`;
}

/** True when a cross-partition query needs the SDK to merge results (the gateway answers 1004). */
function needsPlan(text, parameters, badRequest) {
  const s = parse(text, parameters, badRequest);
  return s.distinct || s.top !== null || s.offset !== null || s.orderBy.length > 0 ||
    s.aggregates.length > 0 || s.composed;
}

/** The service's partitioned query execution info (version 2) for `text`. */
function queryPlan(text, parameters, badRequest) {
  const s = parse(text, parameters, badRequest);
  const top = s.top !== null ? `TOP ${s.top} ` : "";
  let rewrittenQuery;
  if (s.composed) throw badRequest("Compositions of aggregates and other expressions are not allowed.");
  if (s.aggregates.length > 0) {
    if (!s.value) {
      throw badRequest("Cross partition query only supports 'VALUE <AggregateFunc>' for aggregates.");
    }
    const [agg] = s.aggregates;
    const item = agg.name === "avg"
      ? `{"sum": SUM(${agg.argument}), "count": COUNT(${agg.argument})}`
      : `${agg.name.toUpperCase()}(${agg.argument})`;
    rewrittenQuery = `SELECT ${top}VALUE [{"item": ${item}}] ${s.source}`;
  } else {
    const distinct = s.distinct ? "DISTINCT " : "";
    // each range returns at most what the merge can use: TOP, or OFFSET + LIMIT rows; not
    // under DISTINCT, whose duplicates the SDK drops only after the merge
    const window = s.offset !== null && !s.distinct ? ` OFFSET 0 LIMIT ${s.offset + s.limit}` : "";
    const rangeTop = s.top !== null && !s.distinct ? `TOP ${s.top} ` : "";
    if (s.orderBy.length > 0) {
      const alias = rootAlias(s.source);
      const items = s.orderBy.map(o => `{"item": ${o.expression}}`).join(", ");
      const payload = s.value ? s.projection : projectionObject(s.projection, alias);
      const order = s.orderBy.map(o => `${o.expression} ${o.order === "Descending" ? "DESC" : "ASC"}`).join(", ");
      rewrittenQuery = `SELECT ${distinct}${rangeTop}${alias}._rid, [${items}] AS orderByItems, ${payload} AS payload ` +
        `${s.source} ORDER BY ${order}${window}`;
    } else {
      const value = s.value ? "VALUE " : "";
      rewrittenQuery = `SELECT ${distinct}${rangeTop}${value}${s.projection} ${s.source}${window}`;
    }
  }
  let distinctType = "None";
  if (s.distinct) {
    const orderedByProjection = s.value && s.orderBy.length === 1 && s.orderBy[0].expression === s.projection;
    distinctType = orderedByProjection ? "Ordered" : "Unordered";
  }
  return {
    partitionedQueryExecutionInfoVersion: 2,
    queryInfo: {
      distinctType,
      top: s.top,
      offset: s.offset,
      limit: s.limit,
      orderBy: s.orderBy.map(o => o.order),
      orderByExpressions: s.orderBy.map(o => o.expression),
      groupByExpressions: [],
      groupByAliases: [],
      aggregates: s.aggregates.map(a => AGGREGATES[a.name]),
      groupByAliasToAggregateType: {},
      rewrittenQuery,
      hasSelectValue: s.value,
      dCountInfo: null,
      hasNonStreamingOrderBy: false
    },
    queryRanges: [{ min: "", max: "FF", isMinInclusive: true, isMaxInclusive: false }]
  };
}

/**
 * A range query the plan rewrote for an aggregate: `{ name, argument, source }`, else null.
 * The range answers `[{"item": value}]` (AVG: `{"sum", "count"}`) for the SDK to combine.
 */
function rewrittenAggregate(text) {
  const m = /^\s*select\s+(?:top\s+\S+\s+)?value\s+\[\{"item":\s*/i.exec(text);
  if (!m) return null;
  const rest = text.slice(m[0].length);
  const avg = /^\{"sum":\s*SUM\(/.exec(rest);
  const call = avg ? null : /^(COUNT|SUM|MIN|MAX)\(/.exec(rest);
  if (!avg && !call) return null;
  const open = (avg || call)[0].length - 1;
  const close = closing(rest, open);
  const argument = rest.slice(open + 1, close);
  const tail = avg ? `, "count": COUNT(${argument})}}]` : "}]";
  if (!rest.slice(close + 1).startsWith(tail)) return null;
  return {
    name: avg ? "avg" : call[1].toLowerCase(),
    argument,
    source: rest.slice(close + 1 + tail.length).trim()
  };
}

module.exports = { engineShape, needsPlan, queryPlan, rewrittenAggregate, valueAggregate };
