"use strict";
/*
 * Log sequence numbers (LSNs) of the local Cosmos DB endpoint's writes (server.js), as the
 * service numbers them: each physical partition (partition key range) has its own sequence
 * (ranges.js keeps each range's latest). A write advances the LSN of the range it lands in,
 * once: every operation of one transactional batch shares one LSN and one time (`_ts`, the
 * all-versions feed's `crts`), as one commit, even when the batch runs across a second's
 * boundary; a delete is a write too, and so is a time-to-live expiry. What reads LSNs: each
 * version's `_lsn` (store.js), the change feed's continuation (`etag: "<lsn>"` of the range
 * read), the session token and the `lsn` / `x-ms-global-committed-lsn` headers of an answer
 * (the range's latest: responses.js), the estimators that subtract them (.NET's
 * ChangeFeedEstimatorIterator, KEDA's scaler, cosmos-changefeed's).
 *
 * `Write` is one request's write: it takes an LSN from a range when it first writes there and
 * can give them back (a transactional batch that failed: nothing of it is kept, nor its LSN).
 */

const { rangeLsn, setRangeLsn } = require("./ranges");

class Write {
  /** A write to the container `owner` (the package's collection); `ttlExpired`: a TTL delete. */
  constructor(owner, { ttlExpired = false } = {}) {
    this.owner = owner;
    this.ttlExpired = ttlExpired;
    this.lsns = new Map(); // range id -> this write's LSN there
    this.before = new Map(); // range id -> the range's LSN before
    this.at = 0; // when it was written (ms), taken with its first LSN
    this.undos = []; // what else it recorded (the all-versions log), undone with it
  }

  /** This write's LSN in the range `rangeId`: that range's next, taken once. */
  lsnIn(rangeId) {
    let lsn = this.lsns.get(rangeId);
    if (lsn === undefined) {
      const was = rangeLsn(this.owner, rangeId);
      this.before.set(rangeId, was);
      lsn = was + 1;
      setRangeLsn(this.owner, rangeId, lsn);
      this.lsns.set(rangeId, lsn);
      if (!this.at) this.at = Date.now();
    }
    return lsn;
  }

  /** When it was written (ms): one time for all it wrote. */
  time() {
    if (!this.at) this.at = Date.now();
    return this.at;
  }

  /** Give its LSNs back and undo what it recorded (a transactional batch that failed). */
  undo() {
    for (let i = this.undos.length - 1; i >= 0; i -= 1) this.undos[i]();
    this.undos = [];
    for (const [rangeId, was] of this.before) setRangeLsn(this.owner, rangeId, was);
    this.before.clear();
    this.lsns.clear();
  }
}

module.exports = { Write };
