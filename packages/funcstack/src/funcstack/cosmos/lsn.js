"use strict";
/*
 * The account's log sequence number (LSN), for the local Cosmos DB endpoint (server.js).
 *
 * As the service does, every write advances it (all operations of one transactional batch
 * share one LSN, a delete is a write too); every document response carries it (`lsn`, and the
 * session token `x-ms-session-token: 0:-1#<lsn>`), the change feed's continuation is an LSN
 * (`etag: "<lsn>"`) and the state file keeps it across restarts. This module is the only
 * place the counter lives: one per process, shared by every room that reads or advances it.
 */

let value = 0;

/** The latest LSN (the one a read answers with). */
function current() {
  return value;
}

/** Advance for a write and return the write's own LSN. */
function next() {
  value += 1;
  return value;
}

/** Start from a restored snapshot's LSN. */
function set(lsn) {
  value = lsn;
}

module.exports = { current, next, set };
