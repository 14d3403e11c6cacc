"use strict";
/*
 * The change feed of the local Cosmos DB endpoint (server.js), as the service serves the
 * incremental feed (A-IM: Incremental feed) to the SDKs and the Functions trigger: the latest
 * version of each document changed after the continuation, in LSN order, each with its
 * `_lsn`; the continuation is the `etag` ("<lsn>"). Start from the beginning (no
 * If-None-Match), now (If-None-Match: *) or a point in time (If-Modified-Since); pages of
 * x-ms-max-item-count that never split one transaction (one LSN); scoped to a partition key
 * range, a feed range or a partition key (partitions.js); 304 with an unchanged etag when
 * nothing is new. The LSN is the account's, so a continuation taken on a range is valid on
 * the ranges a split makes of it (the service's LSNs are per physical partition; its SDKs hand
 * the parent's continuation to each child all the same). Read from the container's LSN index
 * (store.changedSince, indexes.js), as the service reads its log from a position: a poll costs
 * what was written since its continuation.
 */

const { badRequest, send } = require("./responses");
const { header, unquote } = require("./requests");
const { lsnOf } = require("./store");
const { requestScope, inScope } = require("./partitions");
const globalLsn = require("./lsn");

function handleChangeFeed(req, res, store) {
  const aim = String(header(req, "a-im") || "");
  if (!/incremental feed/i.test(aim)) {
    throw badRequest(`Change feed mode '${aim}' is not supported by the local endpoint.`);
  }
  const colData = store.colData;
  const ifNoneMatch = header(req, "if-none-match");
  const ifModifiedSince = header(req, "if-modified-since");
  const current = globalLsn.current();
  let sinceLsn = 0;
  let sinceMs = null;
  if (ifNoneMatch === "*") {
    sinceLsn = current;
  } else if (ifNoneMatch) {
    const n = parseInt(unquote(ifNoneMatch), 10);
    if (!Number.isFinite(n) || n < 0) throw badRequest(`Invalid change feed continuation '${ifNoneMatch}'.`);
    sinceLsn = n;
  } else if (ifModifiedSince) {
    const t = Date.parse(ifModifiedSince);
    if (Number.isNaN(t)) throw badRequest(`Invalid If-Modified-Since '${ifModifiedSince}'.`);
    sinceMs = t;
  }
  const scope = requestScope(req, store);

  const maxItemCount = parseInt(header(req, "x-ms-max-item-count") || "-1", 10);
  // read from the LSN index (store.changedSince), in LSN order, up to one document past a
  // full page; a page never splits one transaction (same LSN)
  const page = [];
  let truncated = false;
  for (const d of store.changedSince(sinceLsn)) {
    if (sinceMs !== null && (d.__mtime || d._ts * 1000) < sinceMs - (sinceMs % 1000)) continue;
    if (!inScope(colData, d, scope)) continue;
    if (maxItemCount > 0 && page.length >= maxItemCount && lsnOf(d) !== lsnOf(page[page.length - 1])) {
      truncated = true;
      break;
    }
    page.push(d);
  }
  const etagLsn = truncated ? lsnOf(page[page.length - 1]) : Math.max(current, sinceLsn);
  const etag = `"${etagLsn}"`;
  if (page.length === 0) {
    send(req, res, 304, undefined, { etag, "x-ms-item-count": "0" });
    return;
  }
  const out = page.map(d => ({ ...d, _lsn: lsnOf(d) }));
  send(req, res, 200, { _rid: colData._rid, Documents: out, _count: out.length }, {
    etag,
    "x-ms-item-count": String(out.length),
    lsn: String(current),
    "x-ms-global-committed-lsn": String(current)
  });
}

module.exports = { handleChangeFeed };
