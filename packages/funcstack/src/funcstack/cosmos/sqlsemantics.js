"use strict";
/*
 * The Cosmos DB SQL semantics the package's query engine (@zeit/cosmosdb-query 0.7.2) answers
 * otherwise, for the local Cosmos DB endpoint's queries (query.js). The query's syntax tree (the
 * engine's public `Query.ast`) is changed before the engine turns it into code, so the
 * engine's own evaluation runs with the service's rules in these places:
 *
 *   - `=`, `!=` / `<>`, IN and BETWEEN across types, or of a missing value, are undefined, not
 *     false or true (the service's "Equality and comparison operators" table; `!=` between two
 *     objects or two arrays as well, where `=` compares them whole), so NOT of them
 *     is undefined too and a WHERE keeps neither side: they become calls of functions of ours
 *     (FUNCTIONS, passed to the engine with the container's UDFs);
 *   - `x NOT IN (...)` and `x NOT BETWEEN a AND b`, which the engine's parser refuses, are
 *     written for it as IN / BETWEEN with a marker (`x IN (<mark>, ...)`, `x BETWEEN [<mark>,
 *     a] AND b`) and turned into NOT of them after parsing;
 *   - STARTSWITH, ENDSWITH and CONTAINS with their third argument (ignore case);
 *     ARRAY_CONTAINS of an undefined value, and its partial match (`arrayContains`);
 *   - an item of a SELECT list without a name of its own is named as the service names it:
 *     a property by its name (`c.n`: "n", `c["n"]`: "n"), anything else `$1`, `$2`, ... in
 *     the list's order (the engine names `c.a[0]` "0" and cannot compile `c.a[@i]`);
 *   - AVG of values none of which is a number (all undefined) is undefined, not NaN (0 / 0):
 *     the engine's AVG is replaced by the service's on its aggregate functions' object
 *     (sqlparser.js `aggregateFunctions`, checked by internals.js);
 *   - ORDER BY one path keeps the documents without a value there (undefined sorts first, as
 *     the service's default indexing policy indexes every path): the engine drops them when it
 *     sorts by one path and keeps them by two, so `_rid` is added as a last, hidden order, in
 *     the direction of the first item: the order a walk of the ORDER BY's index gives
 *     (queryrun.js), ties included.
 *
 * `withMarkers(text)` before the parse, `serviceSemantics(ast)` after; FUNCTIONS at run time.
 */

const { aggregateFunctions } = require("./sqlparser");

const MARK_NOT_IN = "@__funcstack_not_in";
const MARK_NOT_BETWEEN = "@__funcstack_not_between";

const typeOf = v => {
  if (v === undefined) return "undefined";
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v;
};

function deepEqual(a, b) {
  const ta = typeOf(a);
  if (ta !== typeOf(b)) return false;
  if (ta === "array") return a.length === b.length && a.every((v, i) => deepEqual(v, b[i]));
  if (ta === "object") {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every(k => deepEqual(a[k], b[k]));
  }
  return a === b;
}

/** `a = b` as the service answers it: undefined across types and for a missing value. */
function equal(a, b) {
  if (a === undefined || b === undefined || typeOf(a) !== typeOf(b)) return undefined;
  return deepEqual(a, b);
}

/** `a < b` (op one of < <= > >=): only between two numbers, strings or booleans (or nulls). */
function compare(op, a, b) {
  const t = typeOf(a);
  if (t !== typeOf(b) || t === "undefined" || t === "object" || t === "array") return undefined;
  switch (op) {
    case "<": return a < b;
    case "<=": return a <= b;
    case ">": return a > b;
    default: return a >= b;
  }
}

function and(a, b) {
  if (a === false || b === false) return false;
  return a === true && b === true ? true : undefined;
}

function or(a, b) {
  if (a === true || b === true) return true;
  return a === false && b === false ? false : undefined;
}

function textTest(test) {
  return (a, b, ignoreCase) => {
    if (typeof a !== "string" || typeof b !== "string") return undefined;
    // only the calls with three arguments come here: an ignore-case flag that is not a
    // boolean (undefined included: a missing property) makes the call undefined
    if (typeof ignoreCase !== "boolean") return undefined;
    return ignoreCase ? test(a.toLowerCase(), b.toLowerCase()) : test(a, b);
  };
}

/**
 * ARRAY_CONTAINS(array, value[, partial]) as the service answers it: undefined unless `array`
 * is an array, `value` is defined and `partial` a boolean (undefined: false); a partial match
 * of an object is an item with each of its properties equal (the engine's also matches
 * nested objects partially, and finds an undefined value nowhere: false).
 */
function arrayContains(array, value, partial = false) {
  if (!Array.isArray(array) || value === undefined || typeof partial !== "boolean") return undefined;
  if (partial && typeOf(value) === "object") {
    const entries = Object.entries(value);
    return array.some(item => typeOf(item) === "object" &&
      entries.every(([k, v]) => Object.prototype.hasOwnProperty.call(item, k) && deepEqual(item[k], v)));
  }
  return array.some(item => deepEqual(item, value));
}

/** The functions the rewritten queries call (as UDFs; their names cannot clash with an id). */
const FUNCTIONS = {
  __funcstack_eq: equal,
  __funcstack_ne: (a, b) => {
    // undefined between two objects or two arrays too ("Equality and comparison operators":
    // `!=`, like `<`, compares neither), where `=` compares them whole
    const t = typeOf(a);
    if (t === "object" || t === "array") return undefined;
    const eq = equal(a, b);
    return eq === undefined ? undefined : !eq;
  },
  __funcstack_in: (value, list) => list.reduce((found, item) => or(found, equal(value, item)), false),
  __funcstack_between: (value, low, high) => and(compare(">=", value, low), compare("<=", value, high)),
  __funcstack_array_contains: arrayContains,
  __funcstack_startswith: textTest((a, b) => a.startsWith(b)),
  __funcstack_endswith: textTest((a, b) => a.endsWith(b)),
  __funcstack_contains: textTest((a, b) => a.includes(b))
};

/**
 * AVG as the service computes it: the mean of the numbers, undefined when a value is not a
 * number (a string, a boolean, null, an array or an object) or when there is no number.
 */
function serviceAvg(values) {
  let sum = 0;
  let count = 0;
  for (const v of values) {
    if (v === undefined) continue;
    if (typeof v !== "number") return undefined;
    sum += v;
    count += 1;
  }
  return count > 0 ? sum / count : undefined;
}

aggregateFunctions().AVG = serviceAvg;

/**
 * Calls `visit(i, depth)` for each index of `text` outside string literals, with the depth of
 * brackets there; `visit` returning true stops the walk.
 */
function outsideLiterals(text, visit, from = 0) {
  let depth = 0;
  for (let i = from; i < text.length; i += 1) {
    const ch = text[i];
    if (ch === "'" || ch === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== ch) j += text[j] === "\\" ? 2 : 1;
      i = j;
      continue;
    }
    if (visit(i, depth) === true) return;
    if (ch === "(" || ch === "[" || ch === "{") depth += 1;
    else if (ch === ")" || ch === "]" || ch === "}") depth -= 1;
  }
}

const startsWord = (text, i) => i === 0 || !/[\w@$.]/.test(text[i - 1]);

/** Where the lower bound of a BETWEEN that starts at `from` ends: its AND (-1: none). */
function lowerBoundEnd(text, from) {
  let end = -1;
  outsideLiterals(text, (i, depth) => {
    if (depth < 0) return true; // the bracket the BETWEEN is in closed: no AND of its own
    if (depth === 0 && startsWord(text, i) && /^and\b/i.test(text.slice(i, i + 4))) {
      end = i;
      return true;
    }
    return false;
  }, from);
  return end;
}

/**
 * The query's text with NOT IN / NOT BETWEEN written as IN / BETWEEN with a marker: `x NOT IN
 * (a)` as `x IN (<mark>, a)`, `x NOT BETWEEN a AND b` as `x BETWEEN [<mark>, a] AND b` (the
 * lower bound in an array with the marker, so that the parse is the BETWEEN's own).
 */
function withMarkers(text) {
  const edits = [];
  outsideLiterals(text, i => {
    if (!startsWord(text, i)) return;
    const m = /^not\s+(in\s*\(\s*|between\s)/i.exec(text.slice(i, i + 40));
    if (!m) return;
    if (/^in/i.test(m[1])) {
      const empty = text[i + m[0].length] === ")";
      edits.push([i, m[0].length, `IN (${MARK_NOT_IN}${empty ? "" : ", "}`]);
      return;
    }
    const end = lowerBoundEnd(text, i + m[0].length);
    if (end < 0) return; // not a BETWEEN the parser takes: its error is the answer
    edits.push([i, m[0].length, `BETWEEN [${MARK_NOT_BETWEEN}, `], [end, 0, "] "]);
  });
  let out = text;
  for (const [at, length, replacement] of edits.sort((x, y) => y[0] - x[0])) {
    out = out.slice(0, at) + replacement + out.slice(at + length);
  }
  return out;
}

const call = (name, args) => ({
  type: "scalar_function_expression",
  name: { type: "identifier", name },
  arguments: args,
  udf: true
});
const not = argument => ({ type: "scalar_unary_expression", operator: "NOT", argument });
const isMark = (node, name) => node && node.type === "parameter_name" && node.name === name;

/** Whether a BETWEEN's lower bound is the array NOT BETWEEN was written as (withMarkers). */
const notBetween = node => node.begin && node.begin.type === "scalar_array_expression" &&
  node.begin.elements.length === 2 && isMark(node.begin.elements[0], MARK_NOT_BETWEEN);

/** The node rewritten (children first), with the service's semantics. */
function rewrite(node) {
  if (Array.isArray(node)) return node.map(rewrite);
  if (!node || typeof node !== "object") return node;
  let n = node;
  const out = {};
  for (const [k, v] of Object.entries(n)) out[k] = rewrite(v);
  n = out;
  switch (n.type) {
    case "scalar_binary_expression":
      if (n.operator === "=") return call("__funcstack_eq", [n.left, n.right]);
      if (n.operator === "!=" || n.operator === "<>") return call("__funcstack_ne", [n.left, n.right]);
      return n;
    case "scalar_in_expression": {
      const negated = n.list.length > 0 && isMark(n.list[0], MARK_NOT_IN);
      const list = negated ? n.list.slice(1) : n.list;
      if (list.length === 0) throw new SyntaxError("Syntax error, incorrect syntax near ')'.");
      const found = call("__funcstack_in", [n.value, { type: "scalar_array_expression", elements: list }]);
      return negated ? not(found) : found;
    }
    case "scalar_between_expression": {
      const negated = notBetween(n);
      const found = call("__funcstack_between", [n.value, negated ? n.begin.elements[1] : n.begin, n.end]);
      return negated ? not(found) : found;
    }
    case "scalar_function_expression": {
      const name = n.udf ? null : String(n.name.name).toUpperCase();
      const fn = { STARTSWITH: "__funcstack_startswith", ENDSWITH: "__funcstack_endswith", CONTAINS: "__funcstack_contains" };
      if (name && fn[name] && n.arguments.length === 3) return call(fn[name], n.arguments);
      if (name === "ARRAY_CONTAINS" && (n.arguments.length === 2 || n.arguments.length === 3)) {
        return call("__funcstack_array_contains", n.arguments);
      }
      return n;
    }
    default:
      return n;
  }
}

/** The alias the documents have in a query (`FROM c`, `FROM root r`). */
function rootAlias(select) {
  const source = select.from && select.from.source;
  if (!source) return null;
  if (source.alias) return source.alias.name;
  const e = source.expression && source.expression.expression;
  return e && e.type === "identifier" ? e.name : null;
}

/**
 * The SELECT list's items without a name of their own named as the service names them: a
 * property by its name (the engine's own for `c.n`; `c["n"]`), anything else `$1`, `$2`, ...
 */
function nameSelectItems(select) {
  const list = select && select.properties;
  if (!list || !Array.isArray(list.properties)) return;
  let unnamed = 0;
  for (const item of list.properties) {
    const e = item.property;
    if (item.alias || e.type === "identifier" || (e.type === "scalar_member_expression" && !e.computed)) continue;
    const named = e.type === "scalar_member_expression" && e.property.type === "string_constant";
    item.alias = { type: "identifier", name: named ? e.property.value : `$${(unnamed += 1)}` };
  }
  // a name given twice is refused whatever the documents (the service's 400), not per row
  const seen = new Set();
  for (const item of list.properties) {
    const e = item.property;
    const name = item.alias ? item.alias.name : e.type === "identifier" ? e.name : e.property && e.property.name;
    if (name === undefined) continue;
    if (seen.has(name)) throw new SyntaxError(`Object creation error, property name '${name}' specified more than once.`);
    seen.add(name);
  }
}

/**
 * The engine's syntax tree of a query (`Query.ast`) with the service's semantics (see the
 * header); changed in place, before the engine's code is made from it.
 */
function serviceSemantics(ast) {
  const body = ast.body;
  const rewritten = rewrite(body);
  nameSelectItems(rewritten.select);
  const orderBy = rewritten.orderBy;
  const alias = rootAlias(rewritten);
  if (orderBy && alias) {
    // ties by _rid, in the direction of the first item (the order a walk of its index gives)
    orderBy.expressions.push({
      type: "sort_expression",
      expression: {
        type: "scalar_member_expression",
        object: { type: "identifier", name: alias },
        property: { type: "identifier", name: "_rid" },
        computed: false
      },
      order: orderBy.expressions[0].order === "DESC" ? "DESC" : "ASC"
    });
  }
  ast.body = rewritten;
  return ast;
}

module.exports = {
  withMarkers, serviceSemantics, notBetween, rootAlias, FUNCTIONS, equal, compare, MARK_NOT_IN, MARK_NOT_BETWEEN
};
