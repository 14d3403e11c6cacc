"use strict";
/*
 * What a query can take from a container's indexes (pathindexes.js), for the local Cosmos DB
 * endpoint's query execution (queryrun.js), as the service's query engine uses its index
 * ("Indexing in Azure Cosmos DB - overview", learn.microsoft.com: equality and range filters,
 * IS_DEFINED / IS_NULL / type checks, STARTSWITH, ARRAY_CONTAINS and IN are index seeks or
 * scans of the index; ORDER BY is served by a range or composite index):
 *
 *   - `analyze(ast)` reads the engine's syntax tree of a query (before sqlsemantics.js changes
 *     it): the documents' alias, JOINs, TOP, what the SELECT aggregates, the ORDER BY paths,
 *     and the WHERE as a tree of index terms: a term is a set of key ranges on one path's
 *     index (or on the elements of the array there) and whether the index answers it exactly;
 *     AND and OR of terms; anything else a term no index serves (the documents are read);
 *   - `ranges(term, parameters)` turns a term into key ranges once the parameters are known;
 *     a filter across types (`c.x > 'a'` keeps strings only) is one range of one type, as the
 *     service's comparisons are undefined across types.
 *
 * The WHERE is still evaluated by the engine on every document read: an index only chooses
 * which documents are read, never which are answered, so a term may select more than it keeps
 * (an array compared whole) but never less.
 */

const { below, above, rankOf, MIN_RID, MAX_RID } = require("./sortedkeys");
const { MARK_NOT_IN, notBetween } = require("./sqlsemantics");

const AGGREGATES = new Set(["COUNT", "SUM", "MIN", "MAX", "AVG"]);

/** The path of `node` below the documents' alias (`c.a["b"][0]`: ["a", "b", 0]), or null. */
function memberPath(node, alias) {
  const segs = [];
  let n = node;
  while (n && n.type === "scalar_member_expression") {
    const p = n.property;
    if (!n.computed && p.type === "identifier") segs.unshift(p.name);
    else if (n.computed && p.type === "string_constant") segs.unshift(p.value);
    else if (n.computed && p.type === "number_constant" && Number.isInteger(p.value) && p.value >= 0) {
      segs.unshift(p.value);
    } else return null;
    n = n.object;
  }
  if (!n || n.type !== "identifier" || n.name !== alias || segs.length === 0) return null;
  return segs;
}

/** A constant or a parameter: a function of the parameters giving its value, or null. */
function valueOf(node) {
  if (!node) return null;
  switch (node.type) {
    case "string_constant":
    case "number_constant":
    case "boolean_constant":
      return () => node.value;
    case "null_constant":
      return () => null;
    case "parameter_name":
      return params => params[node.name.slice(1)];
    case "scalar_unary_expression":
      if (node.operator === "-" && node.argument.type === "number_constant") return () => -node.argument.value;
      return null;
    default:
      return null;
  }
}

const ALL = { kind: "all" };
const NONE = { kind: "scan" }; // a condition no index serves

/** A term on one index: `make(params)` gives its key ranges; `exact`: the index answers it. */
function term(segs, make, { exact = true, elements = false, text = "" } = {}) {
  return { kind: "term", segs, elements, make, exact, text };
}

/** The key range of exactly `v` (every _rid). */
const point = v => ({ lo: [v, MIN_RID], hi: [v, MAX_RID] });

/** The key ranges of a comparison `path op v`, within v's type. */
function comparison(op, v) {
  if (v === undefined || (v !== null && typeof v === "object")) return null; // not a seek
  const r = rankOf(v);
  switch (op) {
    case ">": return [{ lo: [v, MAX_RID], hi: [above(r), MIN_RID] }];
    case ">=": return [{ lo: [v, MIN_RID], hi: [above(r), MIN_RID] }];
    case "<": return [{ lo: [below(r), MIN_RID], hi: [v, MIN_RID] }];
    case "<=": return [{ lo: [below(r), MIN_RID], hi: [v, MAX_RID] }];
    default: return null;
  }
}

const FLIP = { ">": "<", ">=": "<=", "<": ">", "<=": ">=" };

/** The smallest string above every string that starts with `prefix` (null: there is none). */
function prefixEnd(prefix) {
  for (let i = prefix.length - 1; i >= 0; i -= 1) {
    const c = prefix.charCodeAt(i);
    if (c < 0xffff) return prefix.slice(0, i) + String.fromCharCode(c + 1);
  }
  return null;
}

const TYPE_CHECKS = { IS_NULL: 1, IS_BOOL: 2, IS_NUMBER: 3, IS_STRING: 4 };

/** The index term of a WHERE condition (see the header). */
function condition(node, alias) {
  if (!node) return ALL;
  switch (node.type) {
    case "boolean_constant":
      return node.value === true ? ALL : NONE;
    case "scalar_member_expression": {
      const segs = memberPath(node, alias); // `WHERE c.flag`: true only
      return segs ? term(segs, () => [point(true)]) : NONE;
    }
    case "scalar_binary_expression": {
      const op = node.operator;
      if (op === "AND" || op === "OR") {
        const terms = [condition(node.left, alias), condition(node.right, alias)];
        return { kind: op === "AND" ? "and" : "or", terms };
      }
      let segs = memberPath(node.left, alias);
      let value = valueOf(node.right);
      let o = op;
      if (!segs || !value) {
        segs = memberPath(node.right, alias);
        value = valueOf(node.left);
        o = FLIP[op] || op;
      }
      if (!segs || !value) return NONE;
      if (o === "=") {
        return term(segs, params => {
          const v = value(params);
          return v === undefined ? [] : [point(v)];
        }, { exact: "primitive" });
      }
      if (FLIP[o]) {
        return term(segs, params => {
          const v = value(params);
          return comparison(o, v) || [];
        });
      }
      return NONE;
    }
    case "scalar_in_expression": {
      if (node.list.length && node.list[0].type === "parameter_name" && node.list[0].name === MARK_NOT_IN) return NONE;
      const segs = memberPath(node.value, alias);
      const values = node.list.map(valueOf);
      if (!segs || values.some(v => !v)) return NONE;
      return term(segs, params => values.map(v => v(params)).filter(v => v !== undefined).map(point),
        { exact: "primitive" });
    }
    case "scalar_between_expression": {
      if (notBetween(node)) return NONE;
      const segs = memberPath(node.value, alias);
      const low = valueOf(node.begin);
      const high = valueOf(node.end);
      if (!segs || !low || !high) return NONE;
      return term(segs, params => {
        const a = low(params);
        const b = high(params);
        if (a === undefined || b === undefined || rankOf(a) !== rankOf(b) || (a !== null && typeof a === "object")) return [];
        return [{ lo: [a, MIN_RID], hi: [b, MAX_RID] }];
      });
    }
    case "scalar_unary_expression": {
      if (node.operator !== "NOT") return NONE;
      const inner = node.argument;
      if (inner.type === "scalar_function_expression" && !inner.udf &&
        String(inner.name.name).toUpperCase() === "IS_DEFINED" && inner.arguments.length === 1) {
        const segs = memberPath(inner.arguments[0], alias);
        if (segs) return term(segs, () => [point(undefined)]);
      }
      return NONE;
    }
    case "scalar_function_expression": {
      if (node.udf) return NONE;
      const name = String(node.name.name).toUpperCase();
      const args = node.arguments;
      if (name === "IS_DEFINED" && args.length === 1) {
        const segs = memberPath(args[0], alias);
        return segs ? term(segs, () => [{ lo: [below(1), MIN_RID], hi: [above(6), MAX_RID] }]) : NONE;
      }
      if (TYPE_CHECKS[name] && args.length === 1) {
        const segs = memberPath(args[0], alias);
        const r = TYPE_CHECKS[name];
        return segs ? term(segs, () => [{ lo: [below(r), MIN_RID], hi: [above(r), MAX_RID] }]) : NONE;
      }
      if (name === "STARTSWITH" && (args.length === 2 || (args.length === 3 && args[2].type === "boolean_constant" &&
        args[2].value === false))) {
        const segs = memberPath(args[0], alias);
        const prefix = valueOf(args[1]);
        if (!segs || !prefix) return NONE;
        return term(segs, params => {
          const p = prefix(params);
          if (typeof p !== "string") return [];
          const end = prefixEnd(p);
          return [{ lo: [p, MIN_RID], hi: end === null ? [above(4), MIN_RID] : [end, MIN_RID] }];
        });
      }
      if (name === "ARRAY_CONTAINS" && (args.length === 2 || (args.length === 3 && args[2].type === "boolean_constant" &&
        args[2].value === false))) {
        const segs = memberPath(args[0], alias);
        const value = valueOf(args[1]);
        if (!segs || !value) return NONE;
        return term(segs, params => {
          const v = value(params);
          return v === undefined ? [] : [point(v)];
        }, { elements: true, exact: "primitive" });
      }
      return NONE;
    }
    default:
      return NONE;
  }
}

/**
 * The key ranges of a term with `params`, and whether the index answers it exactly (an
 * equality with an array or object value selects more than it keeps).
 */
function ranges(t, params) {
  const list = t.make(params);
  let exact = t.exact === true;
  if (t.exact === "primitive") {
    exact = list.every(r => rankOf(r.lo[0]) < 5);
  }
  return { list, exact };
}

/** The alias, the source expression and whether FROM is the documents themselves. */
function fromOf(select) {
  const from = select.from;
  if (!from) return { alias: null, plain: false, joins: false };
  const source = from.source;
  const expr = source.expression;
  const plain = expr.type === "collection_expression" && expr.expression.type === "identifier" && !source.iteration;
  const alias = source.alias ? source.alias.name : (plain ? expr.expression.name : null);
  return { alias, plain, joins: Array.isArray(from.joins) && from.joins.length > 0 };
}

function isAggregate(node) {
  return node && node.type === "scalar_function_expression" && !node.udf &&
    AGGREGATES.has(String(node.name.name).toUpperCase());
}

/**
 * What the engine's syntax tree of a query says the indexes can serve (see the header):
 * {alias, plain, joins, where, orderBy: [{segs, desc}] (segs null: not a path), top (node),
 * aggregate: {name, argument} for `SELECT VALUE AGG(x)`, aggregates: true for an object of
 * aggregates}.
 */
function analyze(ast) {
  const s = ast.body;
  const { alias, plain, joins } = fromOf(s);
  const where = s.where && plain ? condition(s.where.condition, alias) : (s.where ? NONE : ALL);
  const orderBy = s.orderBy
    ? s.orderBy.expressions.map(e => ({ segs: plain ? memberPath(e.expression, alias) : null, desc: e.order === "DESC" }))
    : null;
  const spec = s.select;
  let aggregate = null;
  let aggregates = false;
  if (spec.value && isAggregate(spec.value)) {
    aggregate = { name: String(spec.value.name.name).toUpperCase(), argument: spec.value.arguments[0] || null };
  } else if (spec.properties && spec.properties.properties.some(p => isAggregate(p.property))) {
    aggregates = true;
  }
  return { alias, plain, joins, where, orderBy, top: s.top ? s.top.value : null, aggregate, aggregates };
}

module.exports = { analyze, ranges, memberPath, valueOf, ALL, NONE };
