"use strict";
/*
 * What the local Cosmos DB endpoint (server.js) leaves to the unmodified package
 * @vercel/cosmosdb-server 1.0.1: its own routes and handlers (databases, containers, UDFs,
 * the account), answered in the service's shape: errors as {"code", "message"}, and a
 * container's body without the partition key ranges kept in it (ranges.js, which serves
 * them at /pkranges).
 */

const { packageRoutes } = require("./internals");
const { send } = require("./responses");
const { publicContainer } = require("./ranges");

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
  if (status > 399) {
    const b = body && typeof body === "object" ? body : {};
    const code = b.code || (status === 404 ? "NotFound" : status === 409 ? "Conflict" : "BadRequest");
    send(req, res, status, { code, message: b.message || code });
    return;
  }
  if (onSuccess) onSuccess(status, body);
  let answer = body === undefined ? {} : body;
  if (Array.isArray(answer.DocumentCollections)) {
    answer = { ...answer, DocumentCollections: answer.DocumentCollections.map(publicContainer) };
  } else answer = publicContainer(answer);
  send(req, res, status, answer);
}

module.exports = { handleWithPackage };
