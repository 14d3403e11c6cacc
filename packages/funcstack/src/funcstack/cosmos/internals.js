"use strict";
/*
 * What the local Cosmos DB endpoint (server.js) uses of the packages it stands on beyond their
 * public API, in one place, and the check that each is still where and what it was.
 *
 * The endpoint runs on @vercel/cosmosdb-server (its account model, routes and handlers) and its
 * query engine @zeit/cosmosdb-query (parser, code generator, executor). Both are pinned
 * exactly: node/package.json asks for @vercel/cosmosdb-server 1.0.1 (no range), whose own
 * package.json asks for @zeit/cosmosdb-query 0.7.2 (exact too); node/package-lock.json holds
 * both, and `funcstack setup` installs with `npm ci`. What is used beyond their entry points
 * and type declarations (PINNED below names each, with the room that uses it):
 *
 *   modules        lib/account (Account), lib/account/resource-id (ResourceId, patched by
 *                  ids.js), lib/routes (the package's own routes, passthrough.js),
 *                  lib/utils/get-value (the unique-key values the package indexes by,
 *                  store.js), lib/handler/_patch-operations (patchOperation, store.js),
 *                  the engine's lib/parser.js source (sqlparser.js adds PEG.js's cache to it)
 *                  and its lib/aggregate-functions (sqlsemantics.js replaces its AVG);
 *   the model      Items (documents, collections, databases): `_data` (Map _rid -> item,
 *                  each with read()), `_index`, `_ridCount`, `_set`, `_item`, `_getId`,
 *                  `_getPartition`, `_getPartitionKeyPath`, `_uniqueKeyPaths`, `_parent`, `_getQuery`,
 *                  `_userDefinedFunctions`; an Item's `_data` (a container's settings,
 *                  replaced by resources.js); a collection's `partitionKeyRanges._rid`;
 *   the engine     the syntax tree of `Query.ast` (declared, untyped: the node types and fields
 *                  queryindex.js and sqlsemantics.js read and write), `Query._code` (the code
 *                  it generated, or null: a query thread is given the main thread's,
 *                  queryengine.js), the modules it requires at load that sqlparser.js has
 *                  loaded at their first use (its lib/transformer, @babel/generator,
 *                  @babel/traverse and @turf/turf's `booleanWithin`), its UDF calls
 *                  (`udf: true`), the order items and compositeIndexes `exec` checks, and the
 *                  continuation token it returns (`+RID:<rid>#...#SRC:<n>`, queryrun.js).
 *
 * `check()` runs at start, before the account is built (server.js): an installed version
 * other than the pinned one, a module or an export gone, an object of the model without what
 * is used of it, or a syntax tree of another shape stops the start with an error naming what
 * moved (tests/cosmos/test_cosmos_internals.py is its canary). Upgrading either package means
 * changing the pins here and in node/package.json, and the rooms that use what moved.
 */

require("./sqlparser"); // the parser gets its results cache before the engine loads it
const fs = require("fs");
const path = require("path");

const SERVER = "@vercel/cosmosdb-server";
const ENGINE = "@zeit/cosmosdb-query";
const SERVER_DIR = path.dirname(require.resolve(`${SERVER}/package.json`));
const ENGINE_DIR = path.dirname(require.resolve(`${ENGINE}/package.json`, { paths: [SERVER_DIR] }));

/** The versions this endpoint is written for: node/package.json and its lockfile pin them. */
const PINNED = { [SERVER]: "1.0.1", [ENGINE]: "0.7.2" };

const Account = require("@vercel/cosmosdb-server/lib/account").default;
const ResourceId = require("@vercel/cosmosdb-server/lib/account/resource-id").default;
const packageRoutes = require("@vercel/cosmosdb-server/lib/routes").default;
const getValue = require("@vercel/cosmosdb-server/lib/utils/get-value").default;
const { patchOperation } = require("@vercel/cosmosdb-server/lib/handler/_patch-operations");

class Moved extends Error {}

function installedVersion(dir) {
  return JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")).version;
}

/** Refuse another version than the pinned one, naming both. */
function checkVersion(name, found) {
  if (found !== PINNED[name]) {
    throw new Moved(`${name} ${found} is installed; the endpoint is written for ${PINNED[name]} ` +
      "(funcstack/node/package.json pins it: run `funcstack setup` again, or adapt " +
      "cosmos/internals.js and the rooms it names)");
  }
}

function expect(ok, what) {
  if (!ok) throw new Moved(what);
}

const isFn = f => typeof f === "function";

/** The package's modules and exports used here. */
function checkModules() {
  expect(isFn(Account), `${SERVER}/lib/account: no Account class as its default export`);
  expect(isFn(ResourceId) && isFn(ResourceId.parse) && "toBase64String" in ResourceId &&
    "fromBase64String" in ResourceId,
  `${SERVER}/lib/account/resource-id: ResourceId.parse / toBase64String / fromBase64String (ids.js)`);
  expect(isFn(packageRoutes), `${SERVER}/lib/routes: no routes function as its default export (passthrough.js)`);
  expect(isFn(getValue), `${SERVER}/lib/utils/get-value: no getValue as its default export (store.js)`);
  expect(isFn(patchOperation), `${SERVER}/lib/handler/_patch-operations: no patchOperation (store.js)`);
}

const ITEMS_FIELDS = ["_data", "_index", "_ridCount", "_uniqueKeyPaths", "_parent"];
const ITEMS_METHODS = ["_set", "_item", "_getId", "_getPartition", "_getPartitionKeyPath", "_getQuery",
  "_userDefinedFunctions", "create", "replace", "delete"];

function checkItems(items, name) {
  for (const f of ITEMS_FIELDS) expect(f in items, `${SERVER}'s ${name}: no ${f} (store.js, persistence.js)`);
  for (const m of ITEMS_METHODS) {
    expect(isFn(items[m]), `${SERVER}'s ${name}: no ${m}() (store.js, persistence.js, resources.js)`);
  }
  expect(items._data instanceof Map, `${SERVER}'s ${name}: _data is not a Map of _rid -> item`);
  expect(items._index instanceof Map, `${SERVER}'s ${name}: _index is not a Map`);
}

/** The account model as the rooms use it, on a probe account of its own. */
function checkModel() {
  const account = new Account("localhost", 0);
  checkItems(account.databases, "databases");
  expect(isFn(account.database), `${SERVER}'s Account: no database()`);
  account.databases.create({ id: "probe" });
  const database = account.database("probe");
  expect(database && database.collections, `${SERVER}'s Database: no collections`);
  checkItems(database.collections, "collections");
  database.collections.create({ id: "c", partitionKey: { paths: ["/pk"], kind: "Hash" } });
  const collection = database.collection("c");
  expect(collection && isFn(collection.read) && "_data" in collection,
    `${SERVER}'s Collection: no read() / _data (resources.js replaces a container's settings)`);
  expect(collection.documents && collection.partitionKeyRanges && isFn(collection.partitionKeyRanges._rid),
    `${SERVER}'s Collection: no documents / partitionKeyRanges._rid() (store.js, ranges.js)`);
  expect(collection.userDefinedFunctions, `${SERVER}'s Collection: no userDefinedFunctions`);
  const docs = collection.documents;
  checkItems(docs, "documents");
  expect(docs._parent === collection, `${SERVER}'s documents: _parent is not their collection`);
  const created = docs.create({ id: "d", pk: "p" });
  const item = docs._data.get(created._rid);
  expect(item && isFn(item.read) && item.read() === created,
    `${SERVER}'s documents: _data does not hold an item whose read() is the document`);
  expect(collection.document("d", "p").read() === created, `${SERVER}'s Collection: document(id, key) does not find it`);
  expect(Array.isArray(docs._uniqueKeyPaths) && docs._uniqueKeyPaths[docs._uniqueKeyPaths.length - 1] === "/id",
    `${SERVER}'s documents: _uniqueKeyPaths does not end with /id (persistence.js)`);
  expect(docs._index.get(docs._getId("/id", "d", docs._getPartition(created))) === created._rid,
    `${SERVER}'s documents: _index / _getId / _getPartition do not key a document as persistence.js rebuilds them`);
  expect(JSON.stringify(docs._getPartitionKeyPath()) === '["pk"]',
    `${SERVER}'s documents: _getPartitionKeyPath() does not give the partition key's path (store.js packageKeyOf)`);
  expect(isFn(docs._getQuery("SELECT * FROM c").exec), `${SERVER}'s documents: _getQuery() gives no Query`);
}

/** A node of `type` somewhere under `node` (depth first), or null. */
function find(node, type) {
  if (!node || typeof node !== "object") return null;
  if (node.type === type) return node;
  for (const v of Object.values(node)) {
    const found = find(v, type);
    if (found) return found;
  }
  return null;
}

/**
 * The code the engine generates for the queries `checkEngine` runs (its generator, Babel, on the
 * pinned versions: tests/cosmos/test_cosmos_internals.py checks each is what it generates),
 * given to them as a query thread is given its code (queryengine.js `prepare`): the check runs
 * the engine's executor without loading its code generator, about 0.1 s of CPU an endpoint
 * that runs no query never spends.
 */
const PROBE_CODE = {
  "SELECT VALUE AVG(c.n) FROM c":
    "($a, $b, $c, $h, udf, $p, $maxItemCount, $continuation, $compositeIndexes, $_, $__) => {\n" +
    "  return {\n" +
    "    result: $h.stripUndefined(($__ = $h.sort($c.reduce(($, c) => typeof c !== \"undefined\" ? [...$, {\n" +
    "      c: c\n" +
    "    }] : $, []), $ => $.c._rid), [$a.AVG($__.map(({\n" +
    "      c\n" +
    "    }) => ($_ = c, typeof $_ === \"object\" && $_ ? $_.n : undefined)))])),\n" +
    "    continuation: null\n" +
    "  };\n" +
    "}",
  "SELECT VALUE c.n FROM c WHERE udf.yes(c.n) ORDER BY c.n, c._rid":
    "($a, $b, $c, $h, udf, $p, $maxItemCount, $continuation, $compositeIndexes, $_, $__) => {\n" +
    "  return $h.paginate($h.sort($c.reduce(($, c) => typeof c !== \"undefined\" ? [...$, {\n" +
    "    c: c\n" +
    "  }] : $, []).filter(({\n" +
    "    c\n" +
    "  }) => udf.yes(($_ = c, typeof $_ === \"object\" && $_ ? $_.n : undefined)) === true), " +
    "$ => $.c._rid, $compositeIndexes, [[\"c\", \"n\"], false], [[\"c\", \"_rid\"], false]).map(({\n" +
    "    c\n" +
    "  }) => [($_ = c, typeof $_ === \"object\" && $_ ? $_.n : undefined), {\n" +
    "    c\n" +
    "  }]), $maxItemCount, $continuation, $ => $.c._rid, [[\"c\", \"n\"], false], [[\"c\", \"_rid\"], false]);\n" +
    "}",
};

/** The engine's syntax tree, UDF calls, order items and continuation token as used here. */
function checkEngine() {
  const { queryEngine, aggregateFunctions } = require("./sqlparser"); // eslint-disable-line global-require
  const engine = queryEngine();
  expect(isFn(engine), `${ENGINE}: no query function as its default export`);
  const given = engine("SELECT VALUE 1 FROM c");
  const generated = given._code;
  given._code = "given";
  expect(generated === null && given.code === "given",
    `${ENGINE}'s Query: its code is not kept in _code (queryengine.js gives a query thread the main thread's)`);
  /** A query of PROBE_CODE with its code given. */
  const probe = text => {
    const query = engine(text);
    query._code = PROBE_CODE[text];
    return query;
  };
  const aggregates = aggregateFunctions();
  expect(["AVG", "COUNT", "SUM", "MIN", "MAX"].every(name => isFn(aggregates[name])) &&
    probe("SELECT VALUE AVG(c.n) FROM c").exec([{ n: 1 }, { n: 3 }]).result[0] === 2 && (() => {
    const avg = aggregates.AVG;
    aggregates.AVG = () => "probe";
    try {
      return probe("SELECT VALUE AVG(c.n) FROM c").exec([{ n: 1 }]).result[0] === "probe";
    } finally {
      aggregates.AVG = avg;
    }
  })(), `${ENGINE}'s lib/aggregate-functions: not the object its code calls AVG on (sqlsemantics.js)`);
  const q = engine("SELECT TOP 5 c.a FROM c JOIN t IN c.tags WHERE c.x = 1 AND c.y IN (1, @p) AND " +
    "c.z BETWEEN 1 AND 2 AND NOT IS_DEFINED(c.w) AND udf.f(c['v']) ORDER BY c.a DESC");
  const ast = q.ast;
  const body = ast && ast.body;
  const tree = `${ENGINE}'s syntax tree (Query.ast, read by queryindex.js and sqlsemantics.js)`;
  expect(ast && ast.type === "sql" && body && body.type === "select_query", `${tree}: no sql / select_query`);
  expect(body.from && body.from.type === "from_specification" && body.from.source.type === "from_source" &&
    body.from.source.expression.type === "collection_expression" && Array.isArray(body.from.joins) &&
    body.from.joins[0].iteration === true, `${tree}: FROM is not a from_specification of from_source`);
  expect(body.top && body.top.type === "top_specification" && body.top.value.value === 5, `${tree}: TOP`);
  expect(body.select && body.select.type === "select_specification", `${tree}: select_specification`);
  const where = body.where;
  expect(where && where.type === "filter_condition" && where.condition.type === "scalar_binary_expression" &&
    where.condition.operator === "AND", `${tree}: WHERE is not a filter_condition of ANDs`);
  const eq = find(where, "scalar_binary_expression");
  expect(eq, `${tree}: no scalar_binary_expression`);
  const member = find(where, "scalar_member_expression");
  expect(member && member.object && member.property && "computed" in member, `${tree}: scalar_member_expression`);
  const inList = find(where, "scalar_in_expression");
  expect(inList && inList.value && Array.isArray(inList.list) && inList.list[1].type === "parameter_name" &&
    inList.list[1].name === "@p", `${tree}: scalar_in_expression / parameter_name`);
  const between = find(where, "scalar_between_expression");
  expect(between && between.value && between.begin && between.end, `${tree}: scalar_between_expression`);
  const unary = find(where, "scalar_unary_expression");
  expect(unary && unary.operator === "NOT" && unary.argument.type === "scalar_function_expression" &&
    unary.argument.name.name === "IS_DEFINED", `${tree}: NOT / scalar_function_expression`);
  const udfCall = JSON.stringify(where).includes('"udf":true');
  expect(udfCall, `${tree}: a UDF call is not marked udf: true`);
  expect(body.orderBy && body.orderBy.type === "sort_specification" &&
    body.orderBy.expressions[0].type === "sort_expression" && body.orderBy.expressions[0].order === "DESC",
  `${tree}: ORDER BY is not a sort_specification of sort_expression`);
  // UDF calls, composite order items and the continuation token as exec gives them
  const run = probe("SELECT VALUE c.n FROM c WHERE udf.yes(c.n) ORDER BY c.n, c._rid").exec(
    [{ n: 1, _rid: "a" }, { n: 2, _rid: "b" }, { n: 3, _rid: "c" }],
    { udf: { yes: () => true }, maxItemCount: 1,
      compositeIndexes: [[{ path: "/n", order: "ascending" }, { path: "/_rid", order: "ascending" }]] });
  expect(run && Array.isArray(run.result) && run.result[0] === 1 && run.continuation &&
    /^\+RID:b#RT:\d+(#SRC:\d+)?#TRC:\d+/.test(run.continuation.token),
  `${ENGINE}'s exec: UDFs, composite order items or its continuation token (+RID:...#SRC:...) changed ` +
    "(queryrun.js)");
}

/**
 * Check every internal listed in the header; throws an Error naming what moved. Runs once at
 * start (server.js).
 */
function check() {
  try {
    checkVersion(SERVER, installedVersion(SERVER_DIR));
    checkVersion(ENGINE, installedVersion(ENGINE_DIR));
    checkModules();
    checkModel();
    checkEngine();
  } catch (err) {
    const why = err instanceof Moved ? err.message : `${err && err.message} (while checking it)`;
    throw new Error(`funcstack's Cosmos DB endpoint cannot start on the installed packages: ${why}; ` +
      "see packages/funcstack/docs/cosmos.md, 'The packages underneath'");
  }
}

module.exports = {
  Account, ResourceId, packageRoutes, getValue, patchOperation, check, checkVersion, PINNED, PROBE_CODE
};
