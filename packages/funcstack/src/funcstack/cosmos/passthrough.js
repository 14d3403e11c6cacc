"use strict";
/*
 * What the local Cosmos DB endpoint (server.js) leaves to the unmodified package
 * @vercel/cosmosdb-server 1.0.1: its own routes and handlers (databases, containers,
 * partition key ranges, UDFs, the account), answered in the service's shape: errors as
 * {"code", "message"}, partition key range ids as strings, and the ranges' change feed
 * (read by the SDK's routing map cache) with a constant etag, the set never changing.
 */

const packageRoutes = require("@vercel/cosmosdb-server/lib/routes").default;
const { send } = require("./responses");
const { header } = require("./requests");
const { servicePartitionKeyRanges } = require("./partitions");

/**
 * Everything that is not a document operation: the package's own handlers. `onSuccess(status,
 * body)` runs before a success (< 400) is sent.
 */
async function handleWithPackage(account, req, res, onSuccess) {
  const route = packageRoutes(req);
  let body;
  if (!route) {
    send(req, res, 400, { code: "BadRequest", message: "no route" });
    return;
  }
  const [params, handler] = route;
  try {
    body = await handler(account, req, res, params);
  } catch (err) {
    process.stderr.write(`cosmos local: ${err && err.stack}\n`);
    send(req, res, 500, { code: "InternalServerError", message: String(err && err.message) });
    return;
  }
  const status = res.statusCode || 200;
  if (body && Array.isArray(body.PartitionKeyRanges)) {
    // the service's range ids are strings ("0"); the SDK files session tokens under them
    body.PartitionKeyRanges = servicePartitionKeyRanges(body.PartitionKeyRanges);
  }
  if (status > 399) {
    const b = body && typeof body === "object" ? body : {};
    const code = b.code || (status === 404 ? "NotFound" : status === 409 ? "Conflict" : "BadRequest");
    send(req, res, status, { code, message: b.message || code });
    return;
  }
  if (onSuccess) onSuccess(status, body);
  if (header(req, "a-im")) {
    // partition key ranges are read as a change feed by the SDK's routing map cache:
    // the set never changes (one range), so any known etag is up to date
    if (header(req, "if-none-match")) {
      send(req, res, 304, undefined, { etag: '"1"' });
      return;
    }
    send(req, res, status, body === undefined ? {} : body, { etag: '"1"' });
    return;
  }
  send(req, res, status, body === undefined ? {} : body);
}

module.exports = { handleWithPackage };
