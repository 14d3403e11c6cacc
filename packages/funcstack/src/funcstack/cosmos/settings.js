"use strict";
/*
 * Container settings of the local Cosmos DB endpoint (server.js), completed as the service
 * completes them.
 *
 * The service completes a container's settings and returns them in full: without an indexing
 * policy, {"indexingMode":"consistent","automatic":true,"includedPaths":[{"path":"/*"}],
 * "excludedPaths":[{"path":"/\"_etag\"/?"}]}; a partial one gets the missing fields and the
 * _etag exclusion (mode "none": not automatic, no paths); LastWriterWins on /_ts and the
 * Geography type are the conflict resolution and geospatial defaults. 1.0.1 stores only
 * {"indexingMode":"consistent"}, so a read-modify-write of the policy fails.
 */

const { badRequest } = require("./responses");
const { validTtl } = require("./ttl");

const ETAG_PATH = '/"_etag"/?';

function completeIndexingPolicy(given) {
  const policy = given && typeof given === "object" && !Array.isArray(given) ? { ...given } : {};
  const mode = String(policy.indexingMode || "consistent").toLowerCase();
  policy.indexingMode = mode;
  if (mode === "none") {
    if (policy.automatic === undefined) policy.automatic = false;
    if (!Array.isArray(policy.includedPaths)) policy.includedPaths = [];
    if (!Array.isArray(policy.excludedPaths)) policy.excludedPaths = [];
    return policy;
  }
  if (policy.automatic === undefined) policy.automatic = true;
  if (!Array.isArray(policy.includedPaths)) policy.includedPaths = [{ path: "/*" }];
  const excluded = Array.isArray(policy.excludedPaths) ? policy.excludedPaths : [];
  policy.excludedPaths = excluded.some(e => e && e.path === ETAG_PATH) ? excluded : [...excluded, { path: ETAG_PATH }];
  if (policy.compositeIndexes === undefined || policy.compositeIndexes === null) delete policy.compositeIndexes;
  return policy;
}

function withContainerDefaults(body) {
  const out = { ...body, indexingPolicy: completeIndexingPolicy(body.indexingPolicy) };
  if (!out.conflictResolutionPolicy) {
    out.conflictResolutionPolicy = { mode: "LastWriterWins", conflictResolutionPath: "/_ts", conflictResolutionProcedure: "" };
  }
  if (!out.geospatialConfig || !out.geospatialConfig.type) out.geospatialConfig = { type: "Geography" };
  return out;
}

function checkDefaultTtl(body) {
  if (body && Object.prototype.hasOwnProperty.call(body, "defaultTtl") && body.defaultTtl !== null && !validTtl(body.defaultTtl)) {
    throw badRequest("The value of 'defaultTtl' is invalid. It must be -1 or a positive integer (or omitted to disable TTL).");
  }
}

module.exports = { completeIndexingPolicy, withContainerDefaults, checkDefaultTtl };
