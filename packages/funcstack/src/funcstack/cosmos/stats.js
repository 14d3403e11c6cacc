"use strict";
/*
 * What the local Cosmos DB endpoint's process holds and how long its requests wait for its
 * main thread, local only (no Azure counterpart), so that what a stored document costs and
 * whether a query holds up other requests can be measured (bench/cosmos_queries.py;
 * docs/cosmos.md "Memory").
 *
 * GET /_emulators/stats answers {memory: {rss, heapUsed, heapTotal, external, arrayBuffers}
 * (bytes, as process.memoryUsage() gives them: rss for the process, the rest for the main
 * thread's heap), documents (kept in every container), eventLoop: {p50Ms, p95Ms, p99Ms, maxMs,
 * samples} (how late the main thread ran a 1 ms timer since the last call: what a request
 * arriving meanwhile waited; null at the first call, which starts measuring)}. With ?gc=1 a
 * full garbage collection runs first (it holds the endpoint for a moment: up to a second with
 * a million documents), so that the heap is what is kept, not what waits to be collected.
 * With ?database=<id>, documents counts that database's containers only (0 for a database
 * that does not exist): what a test counts while another writes elsewhere on the endpoint.
 */

const v8 = require("v8");
const vm = require("vm");
const { monitorEventLoopDelay } = require("perf_hooks");
const { CosmosError, send } = require("./responses");
const { collections } = require("./store");
const { URLSearchParams } = require("url");

let collect = null;
let delay = null;

/** A full garbage collection (V8's gc(), exposed the first time it is asked for). */
function fullCollection() {
  if (collect === null) {
    v8.setFlagsFromString("--expose-gc");
    collect = vm.runInNewContext("gc");
  }
  collect();
}

/** The main thread's lateness since the last call (ms), then measured afresh; null at first. */
function eventLoop() {
  if (delay === null) {
    delay = monitorEventLoopDelay({ resolution: 1 }); // from now on: a timer every 1 ms
    delay.enable();
    return null;
  }
  const ms = ns => ns / 1e6;
  const found = {
    p50Ms: ms(delay.percentile(50)),
    p95Ms: ms(delay.percentile(95)),
    p99Ms: ms(delay.percentile(99)),
    maxMs: ms(delay.max),
    samples: delay.count
  };
  delay.reset();
  return found;
}

/** /_emulators/stats: true when the request was this route. */
function handleStatsControl(account, req, res, segs) {
  if (segs[0] !== "_emulators" || segs[1] !== "stats" || segs.length !== 2) return false;
  req.resume();
  if (req.method !== "GET") throw new CosmosError(405, "MethodNotAllowed", "GET /_emulators/stats[?gc=1][&database=<id>]");
  const query = new URLSearchParams(req.url.includes("?") ? req.url.slice(req.url.indexOf("?") + 1) : "");
  if (query.get("gc") === "1") fullCollection();
  const database = query.get("database");
  let documents = 0;
  if (account) {
    for (const colItem of collections(account, database)) documents += colItem.documents._data.size;
  }
  send(req, res, 200, { memory: process.memoryUsage(), documents, eventLoop: eventLoop() });
  return true;
}

module.exports = { handleStatsControl };
