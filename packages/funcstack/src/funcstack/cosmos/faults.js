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
 * Scoped: with "database" (and "container", of that database) in the body, only the document
 * requests on that database's containers (that container) take the fault and use up its
 * count; another database's pass. Azure's own fault injection scopes a rule the same way: the
 * SDKs' fault injection rules are configured on a container (Java's
 * CosmosFaultInjectionHelper.configureFaultInjectionRules(container, rules)). DELETE with the
 * same "database" (and "container") in its body clears only the faults of that scope; DELETE
 * without a body clears every fault. Two tests on one endpoint at once each fault their own
 * database (funcstack's own tests, one endpoint for a run's workers).
 *
 * The pending faults live here, one list per process.
 */

const { badRequest, send } = require("./responses");
const { readJson, controlScope } = require("./requests");

const faults = [];

/**
 * The ids of the database and container a document request names (by id or by resource id),
 * {database, container}; the names as given when the database or container does not exist.
 */
function ownerOf(account, segs) {
  const owner = { database: segs[1], container: segs[3] };
  if (!account) return owner;
  try {
    const database = account.database(segs[1]);
    const dbData = database.read();
    if (!dbData) return owner;
    owner.database = dbData.id;
    const colData = database.collection(segs[3]).read();
    if (colData) owner.container = colData.id;
  } catch (e) {
    // a name the package cannot parse: compared as given
  }
  return owner;
}

/** Whether a fault's scope (none, a database, a container of it) holds the request's owner. */
function inScope(fault, owner) {
  if (fault.database === null) return true;
  if (owner().database !== fault.database) return false;
  return fault.container === null || owner().container === fault.container;
}

function takeFault(req, segs, account) {
  if (faults.length === 0 || segs[0] !== "dbs" || segs[4] !== "docs") return null;
  let found;
  const owner = () => (found === undefined ? (found = ownerOf(account, segs)) : found);
  const i = faults.findIndex(f => (!f.operations || f.operations.includes(req.method)) && inScope(f, owner));
  if (i < 0) return null;
  const f = faults[i];
  f.count -= 1;
  if (f.count <= 0) faults.splice(i, 1);
  return f;
}

async function handleControl(req, res, segs) {
  if (segs[0] !== "_emulators" || segs[1] !== "faults") return false;
  if (req.method === "DELETE") {
    const body = await readJson(req);
    if (body === undefined || body === null) faults.length = 0;
    else {
      const scope = controlScope(body);
      for (let i = faults.length - 1; i >= 0; i--) {
        if (faults[i].database === scope.database && faults[i].container === scope.container) faults.splice(i, 1);
      }
    }
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
  const scope = controlScope(body);
  faults.push({
    statusCode,
    count: Math.max(1, parseInt(body.count || 1, 10)),
    retryAfterMs: Math.max(0, parseInt(body.retryAfterMs || 10, 10)),
    operations: Array.isArray(body.operations) ? body.operations.map(String) : null,
    database: scope.database,
    container: scope.container
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
