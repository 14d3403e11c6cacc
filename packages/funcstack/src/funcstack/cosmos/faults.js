"use strict";
/*
 * Fault injection of the local Cosmos DB endpoint (server.js): local only, no Azure
 * counterpart; the faults it injects are the service's (429 with x-ms-retry-after-ms and
 * sub-status 3200, 408, 503...), so an app's retry policy meets them as against Azure.
 *
 * POST /_emulators/faults {"statusCode":429,"count":3,"retryAfterMs":10,"operations":["POST"]}
 * makes the next `count` document requests (optionally only those HTTP methods) fail with
 * that status (429 carries x-ms-retry-after-ms, like the service). DELETE clears them.
 *
 * The pending faults live here, one list per process.
 */

const { badRequest, send } = require("./responses");
const { readJson } = require("./requests");

const faults = [];

function takeFault(req, segs) {
  if (faults.length === 0 || segs[0] !== "dbs" || segs[4] !== "docs") return null;
  const i = faults.findIndex(f => !f.operations || f.operations.includes(req.method));
  if (i < 0) return null;
  const f = faults[i];
  f.count -= 1;
  if (f.count <= 0) faults.splice(i, 1);
  return f;
}

async function handleControl(req, res, segs) {
  if (segs[0] !== "_emulators" || segs[1] !== "faults") return false;
  if (req.method === "DELETE") {
    faults.length = 0;
    send(req, res, 204, undefined);
    return true;
  }
  if (req.method === "GET") {
    send(req, res, 200, { faults });
    return true;
  }
  const body = (await readJson(req)) || {};
  const statusCode = parseInt(body.statusCode, 10);
  if (!Number.isInteger(statusCode) || statusCode < 400 || statusCode > 599) throw badRequest("statusCode 4xx/5xx required");
  faults.push({
    statusCode,
    count: Math.max(1, parseInt(body.count || 1, 10)),
    retryAfterMs: Math.max(0, parseInt(body.retryAfterMs || 10, 10)),
    operations: Array.isArray(body.operations) ? body.operations.map(String) : null
  });
  send(req, res, 201, { faults });
  return true;
}

function sendFault(req, res, fault) {
  req.resume();
  const headers = {};
  let code = "ServiceUnavailable";
  if (fault.statusCode === 429) {
    headers["x-ms-retry-after-ms"] = String(fault.retryAfterMs);
    headers["x-ms-substatus"] = "3200";
    code = "TooManyRequests";
  } else if (fault.statusCode === 408) code = "RequestTimeout";
  else if (fault.statusCode < 500) code = "BadRequest";
  send(req, res, fault.statusCode, { code, message: `injected fault ${fault.statusCode}` }, headers);
}

module.exports = { takeFault, handleControl, sendFault };
