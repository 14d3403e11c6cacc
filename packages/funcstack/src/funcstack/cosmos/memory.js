"use strict";
/*
 * The local Cosmos DB endpoint's memory, local only (no Azure counterpart): what its process
 * holds and how many documents, so that what a stored document costs can be measured
 * (bench/cosmos_queries.py; docs/cosmos.md "Memory").
 *
 * GET /_emulators/memory answers {rss, heapUsed, heapTotal, external, arrayBuffers (bytes, as
 * process.memoryUsage() gives them for the main thread's heap; rss for the process),
 * documents (kept in every container)}; with ?gc=1 a full garbage collection runs first (it
 * holds the endpoint for a moment: up to a second with a million documents), so that the heap
 * is what is kept, without what is waiting to be collected.
 */

const v8 = require("v8");
const vm = require("vm");
const { CosmosError, send } = require("./responses");
const { collections } = require("./store");

let collect = null;

/** A full garbage collection (V8's gc(), exposed the first time it is asked for). */
function fullCollection() {
  if (collect === null) {
    v8.setFlagsFromString("--expose-gc");
    collect = vm.runInNewContext("gc");
  }
  collect();
}

/** /_emulators/memory: true when the request was this route. */
function handleMemoryControl(account, req, res, segs) {
  if (segs[0] !== "_emulators" || segs[1] !== "memory" || segs.length !== 2) return false;
  req.resume();
  if (req.method !== "GET") throw new CosmosError(405, "MethodNotAllowed", "GET /_emulators/memory[?gc=1]");
  if (/[?&]gc=1(&|$)/.test(req.url)) fullCollection();
  let documents = 0;
  if (account) for (const colItem of collections(account)) documents += colItem.documents._data.size;
  send(req, res, 200, { ...process.memoryUsage(), documents });
  return true;
}

module.exports = { handleMemoryControl };
