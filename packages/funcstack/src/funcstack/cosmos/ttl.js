"use strict";
/*
 * Time to live, for the local Cosmos DB endpoint (server.js), as the service applies it:
 * a ttl (item) or defaultTtl (container) is -1 or a positive integer (0, null and < -1 are
 * refused with 400), and expired items are deleted in the background as well as on access
 * (store.js): a sweep every SWEEP_INTERVAL_MS over every container with TTL on, so expired
 * items also leave the change feed and queries nobody runs. The sweep pops each container's
 * expiry index (indexes.js) instead of reading every document, at most SWEEP_MAX_DELETES a
 * tick (the rest on the next ticks, and on access meanwhile), as the service's background
 * deletion uses spare throughput and may lag behind the expiry time. A tick deletes in slices
 * of about SWEEP_SLICE_MS, yielding to requests between them (each delete is also taken out
 * of the container's indexes: ten thousand at once held the endpoint for a noticeable while).
 */

const { Store, collections } = require("./store");

const SWEEP_INTERVAL_MS = 1000;
const SWEEP_MAX_DELETES = 10000;
const SWEEP_SLICE_MS = 2;
/** Deletes between two looks at the clock. */
const SWEEP_STEP = 64;

function validTtl(value) {
  return Number.isInteger(value) && (value === -1 || value > 0);
}

/** Delete what has expired, at most `max` documents; `afterDeletes()` when any were. */
function sweep(account, now = Date.now(), max = SWEEP_MAX_DELETES) {
  if (!account) return 0;
  let deleted = 0;
  for (const colItem of collections(account)) {
    const colData = colItem.read();
    if (!colData || colData.defaultTtl === undefined || colData.defaultTtl === null) continue;
    deleted += new Store(colItem).deleteExpired(now, max - deleted);
    if (deleted >= max) break;
  }
  return deleted;
}

/**
 * Sweep the account every SWEEP_INTERVAL_MS until the server closes, in slices of
 * SWEEP_SLICE_MS; `afterDeletes()` runs after a slice that deleted something (persistence.js
 * writes the deletes to the journal).
 */
function startSweep(server, getAccount, afterDeletes = () => {}) {
  let sweeping = false;
  let closed = false;
  const tick = () => {
    if (sweeping) return;
    sweeping = true;
    let total = 0;
    const slice = () => {
      let deleted = 0;
      try {
        const until = Date.now() + SWEEP_SLICE_MS;
        for (;;) {
          const n = sweep(getAccount(), Date.now(), Math.min(SWEEP_STEP, SWEEP_MAX_DELETES - total - deleted));
          deleted += n;
          if (n < SWEEP_STEP || Date.now() >= until || total + deleted >= SWEEP_MAX_DELETES) break;
        }
        if (deleted > 0) afterDeletes();
      } catch (err) {
        process.stderr.write(`cosmos local sweep: ${err && err.stack}\n`);
        sweeping = false;
        return;
      }
      total += deleted;
      if (deleted > 0 && total < SWEEP_MAX_DELETES && !closed) setImmediate(slice);
      else sweeping = false;
    };
    slice();
  };
  const timer = setInterval(tick, SWEEP_INTERVAL_MS);
  timer.unref();
  server.on("close", () => {
    closed = true;
    clearInterval(timer);
  });
}

module.exports = { validTtl, sweep, startSweep, SWEEP_INTERVAL_MS };
