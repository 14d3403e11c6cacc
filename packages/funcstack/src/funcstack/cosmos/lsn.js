"use strict";
/*
 * The account's log sequence number (LSN), for the local Cosmos DB endpoint (server.js).
 *
 * As the service does, every write advances it (all operations of one transactional batch
 * share one LSN, a delete is a write too); every document response carries it (`lsn`, and the
 * session token `x-ms-session-token: 0:-1#<lsn>`), the change feed's continuation is an LSN
 * (`etag: "<lsn>"`) and the state file keeps it across restarts. This module is the only
 * place the counter lives: one per process, shared by every room that reads or advances it.
 * A write's time is its LSN's too (`timeOf`): the documents of one transactional batch share
 * one `_ts`, as one commit, even when the batch runs across a second's boundary.
 */

let value = 0;
let issuedAt = 0;

/** The latest LSN (the one a read answers with). */
function current() {
  return value;
}

/** Advance for a write and return the write's own LSN. */
function next() {
  value += 1;
  issuedAt = Date.now();
  return value;
}

/** When `lsn`'s write happened, in ms: when it was issued if it is the latest, else now. */
function timeOf(lsn) {
  return lsn === value && issuedAt ? issuedAt : Date.now();
}

/** Start from a restored snapshot's LSN. */
function set(lsn) {
  value = lsn;
}

module.exports = { current, next, set, timeOf };
