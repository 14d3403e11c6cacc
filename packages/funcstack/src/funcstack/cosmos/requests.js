"use strict";
/*
 * Reading a request to the local Cosmos DB endpoint (server.js): its body (JSON, with the
 * service's 400 for invalid JSON and 413 over a size limit), its headers as the SDKs send
 * them (the partition key header `x-ms-documentdb-partitionkey` as a JSON array of
 * components, `Prefer: return=minimal`, the query content type), etags without their
 * quotes, and the path's segments (percent-decoded, as the service names resources); the
 * scope a local-only control request names (a database, a container of it).
 */

const { badRequest, tooLarge } = require("./responses");

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", c => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

async function readJson(req, limit) {
  const raw = await readBody(req);
  if (limit && raw.length > limit) throw tooLarge();
  if (raw.length === 0) return undefined;
  try {
    return JSON.parse(raw.toString("utf8"));
  } catch (e) {
    throw badRequest("The request payload is invalid JSON.");
  }
}

function header(req, name) {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

const isTrue = (req, name) => String(header(req, name) || "").toLowerCase() === "true";

/** Partition key components from the x-ms-documentdb-partitionkey header, or null. */
function headerPartitionKey(req) {
  const raw = header(req, "x-ms-documentdb-partitionkey");
  if (raw === undefined) return null;
  let parsed;
  try {
    parsed = JSON.parse(raw);
  } catch (e) {
    throw badRequest(`Partition key ${raw} is invalid.`);
  }
  if (!Array.isArray(parsed)) parsed = [parsed];
  return parsed;
}

function unquote(etag) {
  return String(etag).replace(/^W\//, "").replace(/^"(.*)"$/, "$1");
}

/**
 * Minimal responses (Prefer: return=minimal, the SDK's no_response=True): the service answers
 * writes with headers only.
 */
function wantsMinimal(req) {
  return /return=minimal/i.test(String(header(req, "prefer") || ""));
}

const isQueryRequest = req =>
  isTrue(req, "x-ms-documentdb-isquery") || String(header(req, "content-type") || "").startsWith("application/query+json");

function pathSegments(url) {
  let pathname = url.split("?")[0];
  return pathname
    .split("/")
    .filter(s => s.length > 0)
    .map(s => {
      try {
        return decodeURIComponent(s);
      } catch (e) {
        return s;
      }
    });
}

/**
 * The scope a local-only control request's body names (faults.js, query.js): {database,
 * container}, each a name or null (a container only with the database it is in).
 */
function controlScope(body) {
  const name = (value, what) => {
    if (value === undefined || value === null) return null;
    if (typeof value !== "string" || value.length === 0) throw badRequest(`${what}: a name (a non-empty string)`);
    return value;
  };
  const database = name(body.database, "database");
  const container = name(body.container, "container");
  if (container !== null && database === null) throw badRequest("container: needs the database it is in");
  return { database, container };
}

module.exports = {
  readBody,
  readJson,
  header,
  isTrue,
  headerPartitionKey,
  unquote,
  wantsMinimal,
  isQueryRequest,
  pathSegments,
  controlScope
};
