"use strict";
/*
 * Errors and responses of the local Cosmos DB endpoint (server.js), as the service sends them:
 * `CosmosError` (status, code, sub-status) and the errors every room throws (404 with
 * sub-status 1003 for a missing owner, 409, 412, 400, 413), and `send` / `sendError`, which
 * write the service's headers on every answer (x-ms-activity-id, x-ms-request-charge, the
 * body's etag; on an answer about documents the LSN and the session token "<range>:-1#<lsn>"
 * of each range the request touched, each range's own LSN) and its error body
 * {"code", "message"[, "additionalErrorInfo"]}.
 */

const crypto = require("crypto");

class CosmosError extends Error {
  constructor(statusCode, code, message, subStatus) {
    super(message);
    this.statusCode = statusCode;
    this.code = code;
    this.subStatus = subStatus;
  }
}

// SubStatusCodes.CROSS_PARTITION_QUERY_NOT_SERVABLE: the SDK fetches the query plan and merges
const CROSS_PARTITION_QUERY_NOT_SERVABLE = 1004;

const notFound = () =>
  new CosmosError(404, "NotFound", "Entity with the specified id does not exist in the system.");
// As the service answers a document operation whose database or container does not exist:
// 404 with substatus 1003 ("owner resource does not exist"), not a missing document.
const ownerNotFound = () =>
  new CosmosError(404, "NotFound", "Owner resource does not exist.", 1003);
const conflict = () =>
  new CosmosError(409, "Conflict", "Entity with the specified id already exists in the system.");
const preconditionFailed = () =>
  new CosmosError(
    412,
    "PreconditionFailed",
    "Operation cannot be performed because one of the specified precondition is not met."
  );
const badRequest = message => new CosmosError(400, "BadRequest", message);

const tooLarge = () => new CosmosError(413, "RequestEntityTooLarge", "Request size is too large");

function send(req, res, statusCode, body, headers = {}) {
  res.statusCode = statusCode;
  res.setHeader("content-type", "application/json");
  res.setHeader("x-ms-activity-id", crypto.randomUUID());
  res.setHeader("x-ms-request-charge", "1");
  res.setHeader("x-ms-serviceversion", "version=2.14.0.0");
  res.setHeader("date", new Date().toUTCString());
  // The partition's LSN after this operation (a write's own LSN; the latest for a read) and
  // the session token built from it, as the service sends them ("<range>:<version>#<lsn>",
  // the vector session token of a single-region account, one per range the request touched,
  // comma-separated, each with its own range's LSN; partitions.js names them). `lsn` and
  // x-ms-global-committed-lsn are the partition's LSN (the highest of those touched).
  if (res.rangeLsns) {
    const lsns = res.rangeLsns();
    const lsn = String(Math.max(0, ...lsns.map(([, n]) => n)));
    res.setHeader("lsn", lsn);
    res.setHeader("x-ms-global-committed-lsn", lsn);
    res.setHeader("x-ms-session-token", lsns.map(([id, n]) => `${id}:-1#${n}`).join(","));
  }
  if (body && typeof body === "object" && !Array.isArray(body) && body._etag && !headers.etag) {
    res.setHeader("etag", body._etag);
  }
  for (const [k, v] of Object.entries(headers)) {
    if (v !== undefined && v !== null) res.setHeader(k, v);
  }
  if (body === undefined || statusCode === 204 || statusCode === 304) {
    res.end();
  } else {
    res.end(JSON.stringify(body));
  }
}

function sendError(req, res, err) {
  const headers = {};
  if (err.subStatus !== undefined) headers["x-ms-substatus"] = String(err.subStatus);
  const body = { code: err.code, message: err.message };
  if (err.additionalErrorInfo !== undefined) body.additionalErrorInfo = err.additionalErrorInfo;
  send(req, res, err.statusCode, body, headers);
}

module.exports = {
  CosmosError,
  CROSS_PARTITION_QUERY_NOT_SERVABLE,
  notFound,
  ownerNotFound,
  conflict,
  preconditionFailed,
  badRequest,
  tooLarge,
  send,
  sendError
};
