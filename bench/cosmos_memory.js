"use strict";
/*
 * Where the local Cosmos DB endpoint's memory goes per stored document (funcstack/cosmos/;
 * docs/cosmos.md "Memory"): N event documents of about 1 KB (bench/cosmos_queries.py's
 * unrelated documents) written in-process through the endpoint's own store (store.js, the
 * write path of every create), the indexes a query of the contact list builds (the partition
 * index, the primary index, /type and /data/deleted), then each structure taken away in turn
 * and the V8 heap measured after a full collection: what each held, in bytes per document and
 * as a share of the documents' JSON. A measurement for the docs, not a row of `make bench`
 * (whose row is the endpoint's resident memory, bench/cosmos_queries.py).
 *
 * Run from the repository with funcstack's Node packages (`funcstack setup` prints where):
 *   NODE_PATH=~/.cache/funcstack/node-<hash>/node_modules N=100000 \
 *     node --expose-gc bench/cosmos_memory.js
 * Prints one JSON object (bytes per document of each part) and a table.
 */
const path = require("path");
const v8 = require("v8");

const COSMOS = path.join(__dirname, "..", "packages", "funcstack", "src", "funcstack", "cosmos");
const internals = require(path.join(COSMOS, "internals"));
const { Store, indexes } = require(path.join(COSMOS, "store"));
const { pathIndexes } = require(path.join(COSMOS, "pathindexes"));

const N = parseInt(process.env.N || "100000", 10);
const PAYLOAD = "The contact's address changed; the event carries the whole new address. ".repeat(9);

/** bench/cosmos_queries.py's unrelated document. */
function event(i) {
  return {
    id: `event-${i}`,
    partitionKey: `aggregate-${Math.floor(i / 10)}`,
    type: "domainEvent",
    aggregateType: "Contact",
    action: "AddressChanged",
    version: (i % 10) + 1,
    data: { text: PAYLOAD.slice(0, 640), sequence: i },
    createdAt: "2026-01-01T00:00:00+00:00",
    ttl: 864000
  };
}

function heap() {
  global.gc();
  global.gc();
  return v8.getHeapStatistics().used_heap_size;
}

async function main() {
  if (typeof global.gc !== "function") throw new Error("run with node --expose-gc");
  const account = new internals.Account("localhost", 0);
  account.databases.create({ id: "bench" });
  const database = account.database("bench");
  database.collections.create({
    id: "contacts",
    partitionKey: { paths: ["/partitionKey"], kind: "Hash", version: 2 },
    defaultTtl: -1,
    indexingPolicy: {
      indexingMode: "consistent",
      automatic: true,
      includedPaths: [{ path: "/type/?" }, { path: "/data/deleted/?" }],
      excludedPaths: [{ path: "/*" }]
    }
  });
  const collection = database.collection("contacts");
  const docs = collection.documents;
  const store = new Store(collection);
  indexes(collection);
  const empty = heap();
  let json = 0;
  for (let i = 0; i < N; i += 1) {
    // a body as a request's JSON gives it (strings of its own, not slices of one)
    const written = store.insert(JSON.parse(JSON.stringify(event(i)))); // a write of its own
    json += Buffer.byteLength(JSON.stringify(written));
  }
  store.partitionRids(["aggregate-1"]); // the partition index
  const paths = pathIndexes(collection);
  paths.currentPolicy();
  for (const index of [paths.primary(), paths.path(["type"]), paths.path(["data", "deleted"])]) {
    await paths.ready(index); // eslint-disable-line no-await-in-loop
  }
  const full = heap();
  const parts = {};
  let before = full;
  const away = (name, take) => {
    take();
    const now = heap();
    parts[name] = (before - now) / N;
    before = now;
  };
  const index = indexes(collection);
  away("path indexes (primary, /type, /data/deleted)", () => { paths.byName = new Map(); });
  away("partition index", () => { index.partitions = null; });
  away("expiry index", () => { index.expiry.at = []; index.expiry.rids = []; index.expiry.lsns = []; });
  away("LSN index", () => { index.byRange = new Map(); });
  away("the package's id index (_index)", () => { docs._index = new Map(); });
  const texts = [];
  away("what is kept beside the text (StoredDocument: stamps, id, partition key)", () => {
    for (const [rid, item] of docs._data) docs._data.set(rid, item.json);
  });
  away("the package's map of documents (_data) and the _rid strings", () => {
    for (const text of docs._data.values()) texts.push(text);
    docs._data = new Map();
  });
  away("the documents' JSON text", () => { texts.length = 0; });
  const total = (full - empty) / N;
  const result = {
    documents: N,
    json_bytes_per_document: json / N,
    heap_bytes_per_document: total,
    heap_to_json: total / (json / N),
    parts,
    unaccounted: total - Object.values(parts).reduce((a, b) => a + b, 0)
  };
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write(`\n| part | bytes per document | of the JSON |\n|---|---|---|\n`);
  for (const [name, bytes] of Object.entries(parts)) {
    process.stdout.write(`| ${name} | ${bytes.toFixed(0)} | ${(bytes / (json / N)).toFixed(2)}x |\n`);
  }
  process.stdout.write(`| the rest (not freed by any one step: what they shared) | ${result.unaccounted.toFixed(0)} | ` +
    `${(result.unaccounted / (json / N)).toFixed(2)}x |\n`);
  process.stdout.write(`| **in all** (JSON ${(json / N).toFixed(0)} bytes) | ${total.toFixed(0)} | ` +
    `**${result.heap_to_json.toFixed(2)}x** |\n`);
}

main().catch(err => {
  process.stderr.write(`${err && err.stack}\n`);
  process.exit(1);
});
