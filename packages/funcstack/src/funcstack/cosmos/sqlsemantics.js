"use strict";
/*
 * The Cosmos DB SQL semantics the package's query engine (@zeit/cosmosdb-query 0.7.2) answers
 * otherwise, for the local Cosmos DB endpoint's queries (query.js). The query's syntax tree (the
 * engine's public `Query.ast`) is changed before the engine turns it into code, so the
 * engine's own evaluation runs with the service's rules in these places:
 *
 *   - `=`, `!=` / `<>`, IN and BETWEEN across types, or of a missing value, are undefined, not
 *     false or true (the service's "Equality and comparison operators" table), so NOT of them
 *     is undefined too and a WHERE keeps neither side: they become calls of functions of ours
 *     (FUNCTIONS, passed to the engine with the container's UDFs);
 *   - `x NOT IN (...)` and `x NOT BETWEEN a AND b`, which the engine's parser refuses, are
 *     written for it as IN / BETWEEN with a marker and turned into NOT of them after parsing;
 *   - STARTSWITH, ENDSWITH and CONTAINS with their third argument (ignore case);
 *   - an item of a SELECT list without a name of its own is named as the service names it:
 *     a property by its name (`c.n`: "n", `c["n"]`: "n"), anything else `$1`, `$2`, ... in
 *     the list's order (the engine names `c.a[0]` "0" and cannot compile `c.a[@i]`);
 *   - ORDER BY one path keeps the documents without a value there (undefined sorts first, as
 *     the service's default indexing policy indexes every path): the engine drops them when it
 *     sorts by one path and keeps them by two, so `_rid` is added as a last, hidden order, in
 *     the direction of the first item: the order a walk of the ORDER BY's index gives
 *     (queryrun.js), ties included.
 *
 * `withMarkers(text)` before the parse, `serviceSemantics(ast)` after; FUNCTIONS at run time.
 */

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

/** The functions the rewritten queries call (as UDFs; their names cannot clash with an id). */
const FUNCTIONS = {
  __funcstack_eq: equal,
  __funcstack_ne: (a, b) => {
    const eq = equal(a, b);
    return eq === undefined ? undefined : !eq;
  },
  __funcstack_in: (value, list) => list.reduce((found, item) => or(found, equal(value, item)), false),
  __funcstack_between: (value, low, high) => and(compare(">=", value, low), compare("<=", value, high)),
  __funcstack_startswith: textTest((a, b) => a.startsWith(b)),
  __funcstack_endswith: textTest((a, b) => a.endsWith(b)),
  __funcstack_contains: textTest((a, b) => a.includes(b))
};

/**
 * Calls `visit(i)` for each index of `text` outside string literals (and returns the text):
 * the positions where a keyword may start.
 */
function outsideLiterals(text, visit) {
  for (let i = 0; i < text.length; i += 1) {
    const ch = text[i];
    if (ch === "'" || ch === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== ch) j += text[j] === "\\" ? 2 : 1;
      i = j;
      continue;
    }
    visit(i);
  }
}

/** The query's text with NOT IN / NOT BETWEEN written as IN / BETWEEN with a marker. */
function withMarkers(text) {
  const edits = [];
  outsideLiterals(text, i => {
    if (i > 0 && /[\w@$.]/.test(text[i - 1])) return;
    const m = /^not\s+(in\s*\(\s*|between\s)/i.exec(text.slice(i, i + 40));
    if (!m) return;
    if (/^in/i.test(m[1])) {
      const empty = text[i + m[0].length] === ")";
      edits.push([i, m[0].length, `IN (${MARK_NOT_IN}${empty ? "" : ", "}`]);
    } else {
      edits.push([i, m[0].length, `BETWEEN ${MARK_NOT_BETWEEN} AND `]);
    }
  });
  let out = text;
  for (const [at, length, replacement] of edits.reverse()) {
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

/** The left-to-right operands of a chain of ANDs (`a AND b AND c`: [a, b, c]). */
function andOperands(node) {
  if (node.type === "scalar_binary_expression" && node.operator === "AND") {
    return [...andOperands(node.left), ...andOperands(node.right)];
  }
  return [node];
}

function andChain(operands) {
  return operands.reduce((left, right) => ({ type: "scalar_binary_expression", left, operator: "AND", right }));
}

/**
 * `x BETWEEN <marker> AND a AND b` parses as (x BETWEEN <marker> AND a) AND b: within the
 * chain of ANDs, each marked BETWEEN takes the next operand as its upper bound, negated.
 */
function notBetweens(node) {
  const operands = andOperands(node);
  if (!operands.some(o => o.type === "scalar_between_expression" && isMark(o.begin, MARK_NOT_BETWEEN))) return node;
  const out = [];
  for (let i = 0; i < operands.length; i += 1) {
    const o = operands[i];
    if (o.type === "scalar_between_expression" && isMark(o.begin, MARK_NOT_BETWEEN)) {
      if (i + 1 >= operands.length) throw new SyntaxError("Syntax error, incorrect syntax near 'BETWEEN'.");
      out.push({ ...o, begin: o.end, end: operands[i + 1], negated: true });
      i += 1;
    } else out.push(o);
  }
  return andChain(out);
}

/** The node rewritten (children first), with the service's semantics. */
function rewrite(node) {
  if (Array.isArray(node)) return node.map(rewrite);
  if (!node || typeof node !== "object") return node;
  let n = node;
  if (n.type === "scalar_binary_expression" && n.operator === "AND") n = notBetweens(n);
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
      if (isMark(n.begin, MARK_NOT_BETWEEN)) throw new SyntaxError("Syntax error, incorrect syntax near 'BETWEEN'.");
      const found = call("__funcstack_between", [n.value, n.begin, n.end]);
      return n.negated ? not(found) : found;
    }
    case "scalar_function_expression": {
      const name = n.udf ? null : String(n.name.name).toUpperCase();
      const fn = { STARTSWITH: "__funcstack_startswith", ENDSWITH: "__funcstack_endswith", CONTAINS: "__funcstack_contains" };
      if (name && fn[name] && n.arguments.length === 3) return call(fn[name], n.arguments);
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
  withMarkers, serviceSemantics, notBetweens, rootAlias, FUNCTIONS, equal, compare, MARK_NOT_IN, MARK_NOT_BETWEEN
};
