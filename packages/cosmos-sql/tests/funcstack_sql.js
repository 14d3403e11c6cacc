"use strict";
/*
 * funcstack's Cosmos DB query path in-process, for test_sql_engines.py: the endpoint's own
 * handler of a query request (query.js `handleQuery`: the parser with its results cache, the
 * service's semantics, the plan from the indexing policy's indexes, the engine in its query
 * threads, TOP, OFFSET LIMIT, aggregates, pages and their continuations), over a container
 * built as the endpoint builds one (settings completed, one physical partition) and documents
 * written as a point write writes them (documents.js `opUpsert`), without an HTTP listener.
 *
 * node funcstack_sql.js <funcstack's cosmos/ folder>; NODE_PATH its node_modules. One JSON line
 * in per task, one out:
 *   {"documents": [...], "indexingPolicy": {...}, "queries": [{"query", "parameters", "pageSize"}]}
 *   -> {"answers": [{"rows": [...]} | {"error": {"status", "message"}}, ...]}
 * Each task gets a container of its own (dropped after it); every document is written in the
 * partition "p" (its `partitionKey`), and each query is sent as the SDK sends one scoped to it
 * (x-ms-documentdb-partitionkey), its pages followed to the last.
 */

const path = require("path");
const readline = require("readline");
const { Readable } = require("stream");

const COSMOS = process.argv[2];
const room = name => require(path.join(COSMOS, `${name}.js`)); // eslint-disable-line global-require
const internals = room("internals"); // first: the parser's results cache
internals.check();
const { Store } = room("store");
const { Write } = room("lsn");
const { withContainerDefaults } = room("settings");
const { layOut } = room("ranges");
const { opUpsert } = room("documents");
const { handleQuery } = room("query");
const queryThreads = room("queryworker");

const PARTITION = "p";
const account = new internals.Account("localhost", 0);
account.databases.create({ id: "db" });
const database = account.database("db");
let containers = 0;

function container(indexingPolicy) {
  const id = `c${(containers += 1)}`;
  database.collections.create(withContainerDefaults({
    id, partitionKey: { paths: ["/partitionKey"], kind: "Hash", version: 2 }, indexingPolicy
  }));
  const owner = database.collection(id);
  layOut(owner, 1);
  return { id, store: new Store(owner) };
}

/** One page of a query, as handleQuery answers the request: {status, body, continuation}. */
async function page(store, query, continuation) {
  const req = Readable.from([Buffer.from(JSON.stringify({ query: query.query, parameters: query.parameters || [] }))]);
  req.method = "POST";
  req.url = "/dbs/db/colls/c/docs";
  req.headers = {
    "x-ms-documentdb-isquery": "true",
    "content-type": "application/query+json",
    "x-ms-documentdb-partitionkey": JSON.stringify([PARTITION]),
    "x-ms-max-item-count": String(query.pageSize || -1)
  };
  if (continuation) req.headers["x-ms-continuation"] = continuation;
  const headers = {};
  const res = {
    statusCode: 0,
    body: "",
    setHeader: (name, value) => { headers[name.toLowerCase()] = value; },
    removeHeader: name => { delete headers[name.toLowerCase()]; },
    end: body => { res.body = body || ""; }
  };
  await handleQuery(req, res, store);
  return { status: res.statusCode, body: JSON.parse(res.body), continuation: headers["x-ms-continuation"] };
}

/** Every row of a query, page after page, or the error it was answered with. */
async function answer(store, query) {
  const rows = [];
  let continuation = null;
  for (let pages = 0; pages < 10000; pages += 1) {
    let p;
    try {
      p = await page(store, query, continuation);
    } catch (err) {
      if (err && err.statusCode) return { error: { status: err.statusCode, message: err.message } };
      throw err;
    }
    if (p.status !== 200) return { error: { status: p.status, message: p.body.message } };
    rows.push(...p.body.Documents);
    continuation = p.continuation;
    if (!continuation) return { rows };
  }
  throw new Error(`${query.query}: more than 10000 pages`);
}

async function run(task) {
  const { id, store } = container(task.indexingPolicy);
  try {
    for (const document of task.documents) {
      opUpsert(store, { ...document, partitionKey: PARTITION }, null, undefined, new Write(store.collection));
    }
    const answers = [];
    for (const query of task.queries) answers.push(await answer(store, query));
    return { answers };
  } finally {
    database.collections.delete(id);
  }
}

const lines = readline.createInterface({ input: process.stdin });
let done = Promise.resolve();
lines.on("line", line => {
  done = done
    .then(() => run(JSON.parse(line)))
    .then(result => process.stdout.write(`${JSON.stringify(result)}\n`))
    .catch(err => {
      process.stderr.write(`${(err && err.stack) || err}\n`);
      process.exit(1);
    });
});
lines.on("close", () => done.then(() => queryThreads.stop()));
