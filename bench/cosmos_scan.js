"use strict";
/*
 * What a scan (a query no index serves: every document read) costs the local Cosmos DB
 * endpoint's main thread, the thread that answers every other request (docs/cosmos.md,
 * "Never stall"): a state folder loaded in-process as the endpoint loads it, then the scan
 * `SELECT VALUE COUNT(1) FROM c WHERE LOWER(c.type) = 'contact'` run RUNS times through
 * queryrun.js (the engine in its query thread, as in the endpoint); for each, its wall time,
 * how busy the main thread was meanwhile (its event loop's utilization), how late it ran (a
 * 1 ms timer: p99 and max) and the process's CPU. Under `node --trace-gc` the main thread's
 * collections during the scans show beside it. A measurement for the docs, not a row of
 * `make bench` (whose row is a point read's latency beside a scan loop, bench/cosmos_queries.py).
 *
 * A state folder of a million event documents (bench/cosmos_queries.py's), then the scans:
 *   .venv/bin/python -c "from pathlib import Path; from bench.cosmos_queries import event, POLICY;
 *     from bench.cosmos_scale import write_kept_state; write_kept_state(Path('/tmp/s1m'),
 *     Path('/tmp/s1m.log'), 1000000, document_of=event, indexing_policy=POLICY)"
 *   NODE_PATH=~/.cache/funcstack/node-<hash>/node_modules RUNS=3 \
 *     node --max-old-space-size=4096 --trace-gc --expose-gc bench/cosmos_scan.js /tmp/s1m
 */
const path = require("path");
const { performance, monitorEventLoopDelay } = require("perf_hooks");

const COSMOS = path.join(__dirname, "..", "packages", "funcstack", "src", "funcstack", "cosmos");
const internals = require(path.join(COSMOS, "internals"));
const persistence = require(path.join(COSMOS, "persistence"));
const { Offers } = require(path.join(COSMOS, "offers"));
const { offerRid } = require(path.join(COSMOS, "ids"));
const { resolveStore } = require(path.join(COSMOS, "store"));
const queryrun = require(path.join(COSMOS, "queryrun"));
const queryThreads = require(path.join(COSMOS, "queryworker"));

const RUNS = Number(process.env.RUNS || 3);
const SCAN = "SELECT VALUE COUNT(1) FROM c WHERE LOWER(c.type) = 'contact'";

(async () => {
  const kept = persistence.open({ stateDir: process.argv[2] });
  const account = new internals.Account("localhost", 0);
  account.offers = new Offers(offerRid);
  persistence.load(account, kept);
  const store = resolveStore(account, "bench", "contacts");
  const options = {
    parameters: [],
    scope: { pk: null, range: null, epk: null, ranges: [] },
    span: null,
    measure: false,
    continuation: null,
    partial: false,
  };
  for (let run = 0; run < RUNS; run += 1) {
    const late = monitorEventLoopDelay({ resolution: 1 });
    late.enable();
    const busy = performance.eventLoopUtilization();
    const cpu = process.cpuUsage();
    const started = performance.now();
    const found = await queryrun.runAggregate(store, [{ name: "COUNT", text: SCAN }], options);
    const wall = performance.now() - started;
    const used = performance.eventLoopUtilization(busy);
    const spent = process.cpuUsage(cpu);
    late.disable();
    console.log(
      `scan ${run + 1} (count ${found.values[0]}): ${wall.toFixed(0)} ms; the main thread busy ` +
        `${(used.utilization * 100).toFixed(0)}% (${used.active.toFixed(0)} ms), late p99 ` +
        `${(late.percentile(99) / 1e6).toFixed(1)} ms, max ${(late.max / 1e6).toFixed(0)} ms; ` +
        `the process's CPU ${((spent.user + spent.system) / 1000).toFixed(0)} ms`,
    );
  }
  kept.close();
  queryThreads.stop();
})();
