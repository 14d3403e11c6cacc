"use strict";
/*
 * Entra ID (AAD) tokens at the local Cosmos DB endpoint (server.js), as the service's
 * data-plane RBAC treats them.
 *
 * With an Entra ID token the service authorizes data-plane RBAC actions only (items, queries,
 * change feed, reading metadata): creating, replacing or deleting databases and containers and
 * replacing throughput are control-plane operations, refused with 403 and sub-status 5300
 * (AAD_REQUEST_NOT_AUTHORIZED). Tokens themselves are not checked here.
 */

const { CosmosError } = require("./responses");
const { header, isQueryRequest } = require("./requests");

function isAadRequest(req) {
  let auth = String(header(req, "authorization") || "");
  try {
    auth = decodeURIComponent(auth);
  } catch (e) {
    return false;
  }
  return /(^|&)type=aad(&|$)/i.test(auth);
}

/** The RBAC action a management operation needs, or null for a data-plane operation. */
function managementAction(req, segs) {
  if (isQueryRequest(req) || segs[0] === "_emulators") return null;
  const m = req.method;
  if (segs[0] === "offers") return m === "PUT" ? "throughputSettings/write" : null;
  if (segs[0] !== "dbs") return null;
  if (segs.length === 1) return m === "POST" ? "sqlDatabases/write" : null;
  if (segs.length === 2) return m === "DELETE" ? "sqlDatabases/delete" : null;
  if (segs[2] !== "colls") return m === "GET" ? null : "sqlDatabases/users/write";
  if (segs.length === 3) return m === "POST" ? "sqlDatabases/containers/write" : null;
  if (segs.length === 4) {
    if (m === "PUT") return "sqlDatabases/containers/write";
    if (m === "DELETE") return "sqlDatabases/containers/delete";
    return null;
  }
  if (["sprocs", "triggers", "udfs"].includes(segs[4]) && m !== "GET" && !(m === "POST" && segs.length === 6)) {
    return `sqlDatabases/containers/${segs[4] === "sprocs" ? "storedProcedures" : segs[4] === "udfs" ? "userDefinedFunctions" : "triggers"}/write`;
  }
  return null;
}

function refuseAadManagement(account, req, segs) {
  const action = managementAction(req, segs);
  if (!action || !isAadRequest(req)) return null;
  const resource = segs.join("/");
  return new CosmosError(403, "Forbidden",
    `Request blocked by Auth ${account.read().id} : Request is blocked because principal does not have required ` +
    `RBAC permissions to perform action [Microsoft.DocumentDB/databaseAccounts/${action}] on resource [${resource}]. ` +
    "Management operations are not supported through the data plane with Entra ID tokens. " +
    "Learn more: https://aka.ms/cosmos-native-rbac.", 5300);
}

module.exports = { refuseAadManagement };
