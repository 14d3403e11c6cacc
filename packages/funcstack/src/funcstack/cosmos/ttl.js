"use strict";
/*
 * Time to live, for the local Cosmos DB endpoint (server.js), as the service applies it:
 * a ttl (item) or defaultTtl (container) is -1 or a positive integer (0, null and < -1 are
 * refused with 400), and expired items are deleted in the background as well as on access
 * (store.js): a sweep every SWEEP_INTERVAL_MS over every container with TTL on, so expired
 * items also leave the change feed and queries nobody runs.
 */

const { Store, collections } = require("./store");

const SWEEP_INTERVAL_MS = 1000;

function validTtl(value) {
  return Number.isInteger(value) && (value === -1 || value > 0);
}

function sweep(account) {
  if (!account) return;
  for (const colItem of collections(account)) {
    const colData = colItem.read();
    if (!colData || colData.defaultTtl === undefined || colData.defaultTtl === null) continue;
    new Store(colItem).all();
  }
}

/** Sweep the account every SWEEP_INTERVAL_MS until the server closes. */
function startSweep(server, getAccount) {
  const timer = setInterval(() => {
    try {
      sweep(getAccount());
    } catch (err) {
      process.stderr.write(`cosmos local sweep: ${err && err.stack}\n`);
    }
  }, SWEEP_INTERVAL_MS);
  timer.unref();
  server.on("close", () => clearInterval(timer));
}

module.exports = { validTtl, sweep, startSweep, SWEEP_INTERVAL_MS };
