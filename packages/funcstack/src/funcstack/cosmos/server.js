#!/usr/bin/env node
"use strict";
/*
 * Local Cosmos DB endpoint: a stand-in for an Azure Cosmos DB account, for any app.
 *
 * Built at start-up on top of the unmodified npm package @vercel/cosmosdb-server 1.0.1:
 * its in-memory account model (databases, containers, documents, partition key ranges),
 * its SQL query engine and its routes are reused as they are; this file and its rooms put
 * a request handler in front of them that serves the document-level operations itself, closing
 * the gaps of 1.0.1 that the azure-cosmos Python SDK hits (docs/cosmos.md lists them):
 *
 *   - atomic transactional batch (x-ms-cosmos-batch-atomic), 424 for the other ops,
 *     per-op ifMatch, replace/upsert/patch inside a batch, <= 100 operations;
 *   - proper 404 / 409 / 412 / 304 on point operations;
 *   - incremental change feed (A-IM: Incremental feed) with etag (LSN) continuations,
 *     start from beginning / now / point in time, paging, partition-key and EPK scope;
 *   - TTL (container defaultTtl + item ttl), lazily on access plus a periodic sweep;
 *   - queries scoped to the x-ms-documentdb-partitionkey header, served from range indexes
 *     as the indexing policy declares them, a slice at a time (never stalling the others);
 *   - resource ids in the service's encoding (base64 with '-' for '/');
 *   - offers (throughput: read, query, replace; manual and autoscale);
 *   - the service's default indexing policy, filled in when a container is created;
 *   - management operations refused (403) to Entra ID (AAD) tokens, as data-plane RBAC does;
 *   - HTTP keep-alive.
 *   - physical partitions: a container's partition key ranges (declared, or as its
 *     throughput needs), /pkranges with parents and the incremental read, requests scoped by
 *     range (410 / 1002 for a range that was split), live splits on request;
 * Everything else (databases, containers, UDFs, account) goes to the package.
 *
 * One room per idea, each following the service's behaviour in its own file:
 *   server.js       the listener: routing of each request to a room, createServer, the CLI
 *   ids.js          resource ids in the service's encoding (patches the package's ResourceId)
 *   lsn.js          LSNs: each physical partition's own, taken by each write (`Write`)
 *   responses.js    CosmosError, the service's errors, send / sendError
 *   requests.js     bodies, headers, partition key header, path segments
 *   store.js        the Store over the package's collection: stamps, partition keys, TTL on access
 *   partitions.js   EPK of a document, its range, the scope of a request (range, feed range, key)
 *   ranges.js       a container's physical partitions (partition key ranges), /pkranges
 *   splits.js       live splits and merges on request (local only)
 *   documents.js    point operations (create, replace, upsert, read, delete, patch)
 *   batch.js        the transactional batch
 *   query.js        queries, query plans, the read feed (answered as the gateway answers)
 *   queryrun.js     how a query runs: from the indexes, a slice at a time, pages that resume
 *   queryengine.js  the engine's part of a query (evaluating it on the documents' text)
 *   queryworker.js  the query threads the engine runs in (the main thread answers meanwhile)
 *   queryindex.js   what a WHERE and an ORDER BY can take from the indexes
 *   pathindexes.js  range indexes on document paths, as the indexing policy declares them
 *   sortedkeys.js   the service's order of values across types; the indexes' sorted entries
 *   sqlsemantics.js the service's SQL semantics where the package's engine differs
 *   changefeed.js   the change feed: latest version (incremental) and all versions and deletes
 *   allversions.js  the log of every create, replace and delete the all-versions feed reads
 *   settings.js     container settings completed as the service completes them
 *   resources.js    database / container create, replace, delete; delete by partition key
 *   offers.js       throughput (offers)
 *   passthrough.js  everything the package serves itself
 *   aad.js          Entra ID (AAD) tokens refused management operations
 *   faults.js       fault injection (local only)
 *   stats.js        the endpoint's memory, documents and main thread's lateness (local only)
 *   ttl.js          TTL validity and the periodic sweep
 *   persistence.js  --state-dir: what is kept, loaded, committed before each answer
 *   journal.js      the state directory's files: snapshot, journal, compaction
 *   indexes.js      a container's LSN index (change feed) and expiry index (TTL sweep)
 *   epk.js, queryplan.js  effective partition keys; query plans as the service's gateway
 *   sqlparser.js    the package's SQL parser with a results cache (linear, not exponential)
 *   internals.js    what is used of the packages beyond their public API, pinned, checked at start
 *
 *
 * CLI: node server.js [--host 127.0.0.1] [--port 0] [--no-ssl] [--log-requests]
 *      [--cert cert.pem --key key.pem] (default: the package's self-signed certificate)
 *      [--state-dir DIR [--state-fsync] [--state-compact-bytes N]] (persistence.js)
 * Prints one JSON line on stdout when ready: {"ready":true,"port":N,"endpoint":"..."}.
 */

const fs = require("fs");
const http = require("http");
const https = require("https");
const path = require("path");

const internals = require("./internals"); // first: the parser's cache, the packages' pins
const PKG_DIR = path.dirname(require.resolve("@vercel/cosmosdb-server/package.json"));
const { Account } = internals;
const { offerRid } = require("./ids");
const { CosmosError, send, sendError, tooLarge, badRequest } = require("./responses");
const { readBody, readJson, header, isTrue, headerPartitionKey, wantsMinimal, pathSegments } = require("./requests");
const { resolveStore, docPartitionComponents } = require("./store");
const { opCreate, opReplace, opUpsert, opRead, opDelete, opPatch, documentIdOf, docHeaders } = require("./documents");
const { handleBatch, MAX_BATCH_BYTES } = require("./batch");
const { handleQuery, handleQueryPlan, handleReadFeed, handleQueryControl } = require("./query");
const { handleChangeFeed } = require("./changefeed");
const { answerFor, rangeOfKey, requestScope } = require("./partitions");
const { handlePartitionKeyRanges } = require("./ranges");
const { handleRangesControl } = require("./splits");
const {
  handlePartitionKeyDelete, handleContainerReplace, handleResourceCreate, handleResourceDelete
} = require("./resources");
const { Offers, handleOffers } = require("./offers");
const { handleWithPackage } = require("./passthrough");
const { refuseAadManagement } = require("./aad");
const { takeFault, handleControl, sendFault } = require("./faults");
const { startSweep } = require("./ttl");
const { handleStatsControl } = require("./stats");
const queryThreads = require("./queryworker");
const persistence = require("./persistence");
const { Write } = require("./lsn");

const MAX_DOCUMENT_BYTES = 2 * 1024 * 1024;

/** Returns true when the request was handled here (document-level operations). */
async function handleDocuments(account, req, res, segs) {
  if (req.method === "POST" && segs.length === 6 && segs[0] === "dbs" && segs[2] === "colls" &&
      segs[4] === "operations" && segs[5] === "partitionkeydelete") {
    handlePartitionKeyDelete(account, req, res, segs);
    return true;
  }
  // /dbs/{db}/colls/{coll}/pkranges: the container's physical partitions (ranges.js)
  if (req.method === "GET" && segs.length === 5 && segs[0] === "dbs" && segs[2] === "colls" &&
      segs[4] === "pkranges") {
    handlePartitionKeyRanges(req, res, resolveStore(account, segs[1], segs[3]).collection);
    return true;
  }
  // /dbs/{db}/colls/{coll}/docs[/{id}]
  if (segs.length < 5 || segs[0] !== "dbs" || segs[2] !== "colls" || segs[4] !== "docs" || segs.length > 6) {
    return false;
  }
  const store = resolveStore(account, segs[1], segs[3]);
  // As the service answers document operations: the container by name and by resource id,
  // and the partition key range(s) the request works on (partitions.js; a range that was
  // split answers 410 / 1002 here, before anything is read). The SDK files the session token
  // it receives under the container and range these name.
  const colData = store.colData;
  res.setHeader("x-ms-alt-content-path", `dbs/${account.database(segs[1]).read().id}/colls/${colData.id}`);
  res.setHeader("x-ms-content-path", colData._rid);
  answerFor(res, store.collection, requestScope(req, store).ranges);
  const method = req.method;
  const pk = () => headerPartitionKey(req);
  if (segs.length === 5) {
    if (method === "GET") {
      if (header(req, "a-im")) handleChangeFeed(req, res, store);
      else await handleReadFeed(req, res, store);
      return true;
    }
    if (method !== "POST") throw new CosmosError(405, "MethodNotAllowed", "Method not allowed");
    const contentType = String(header(req, "content-type") || "");
    if (isTrue(req, "x-ms-cosmos-is-query-plan-request")) {
      await handleQueryPlan(req, res);
      return true;
    }
    if (isTrue(req, "x-ms-documentdb-isquery") || contentType.startsWith("application/query+json")) {
      await handleQuery(req, res, store);
      return true;
    }
    const raw = await readBody(req);
    let body;
    try {
      body = JSON.parse(raw.toString("utf8"));
    } catch (e) {
      throw badRequest("The request payload is invalid JSON.");
    }
    if (isTrue(req, "x-ms-cosmos-is-batch-request")) {
      if (raw.length > MAX_BATCH_BYTES) throw tooLarge();
      handleBatch(req, res, store, body);
      return true;
    }
    if (raw.length > MAX_DOCUMENT_BYTES) throw tooLarge();
    if (pk() === null && body && typeof body === "object" && !Array.isArray(body)) {
      answerFor(res, store.collection, [rangeOfKey(store, docPartitionComponents(colData, body))]);
    }
    const write = new Write(store.collection);
    const r = isTrue(req, "x-ms-documentdb-is-upsert")
      ? opUpsert(store, body, pk(), header(req, "if-match"), write)
      : opCreate(store, body, pk(), write);
    send(req, res, r.statusCode, wantsMinimal(req) ? undefined : r.doc, docHeaders(r.doc));
    return true;
  }
  const id = documentIdOf(account, store, segs);
  if (method === "GET") {
    const r = opRead(store, id, pk(), header(req, "if-none-match"));
    send(req, res, r.statusCode, r.statusCode === 304 ? undefined : r.doc, docHeaders(r.doc));
    return true;
  }
  if (method === "DELETE") {
    // a delete is a write: its range's LSN advances, the session token it answers is a new one
    const r = opDelete(store, id, pk(), header(req, "if-match"), new Write(store.collection));
    send(req, res, r.statusCode, undefined);
    return true;
  }
  if (method === "PUT") {
    const body = await readJson(req, MAX_DOCUMENT_BYTES);
    const r = opReplace(store, id, body, pk(), header(req, "if-match"), new Write(store.collection));
    send(req, res, r.statusCode, wantsMinimal(req) ? undefined : r.doc, docHeaders(r.doc));
    return true;
  }
  if (method === "PATCH") {
    const body = await readJson(req);
    const r = opPatch(store, id, body, pk(), header(req, "if-match"), new Write(store.collection));
    send(req, res, r.statusCode, wantsMinimal(req) ? undefined : r.doc, docHeaders(r.doc));
    return true;
  }
  throw new CosmosError(405, "MethodNotAllowed", "Method not allowed");
}

/**
 * The account read (GET /): the package's account, its regional endpoints named by the address
 * the client reached it at (its Host header). The SDK sends every request after this read to
 * the regional endpoint it names (enable_endpoint_discovery), so a client keeps the address
 * it was given: azure-cosmos verifies the certificate of https://[::ffff:127.0.0.1]:<port>/
 * but not of https://127.0.0.1:<port>/ (docs/cosmos.md, "Certificate"), and a client of
 * another name (a LAN address) is not sent to the one the endpoint listens on.
 */
function readAccount(account, req, res, opts) {
  const meta = account.read();
  const scheme = opts.ssl === false ? "http" : "https";
  const { localAddress, localPort } = req.socket;
  const listening = localAddress.includes(":") ? `[${localAddress}]:${localPort}` : `${localAddress}:${localPort}`;
  const here = `${scheme}://${req.headers.host || listening}/`;
  const located = locations => locations.map(loc => ({ ...loc, databaseAccountEndpoint: here }));
  send(req, res, 200, {
    ...meta,
    writableLocations: located(meta.writableLocations),
    readableLocations: located(meta.readableLocations),
  });
}

function createRequestListener(getAccount, opts) {
  return (req, res) => {
    if (opts.logRequests) {
      process.stderr.write(`${JSON.stringify({ method: req.method, url: req.url, headers: req.headers })}\n`);
    }
    (async () => {
      const account = getAccount();
      const segs = pathSegments(req.url);
      try {
        if (await handleControl(req, res, segs)) return;
        if (await handleQueryControl(req, res, segs)) return;
        if (await handleRangesControl(account, req, res, segs)) return;
        if (handleStatsControl(account, req, res, segs)) return;
        const fault = takeFault(req, segs, account);
        if (fault) {
          sendFault(req, res, fault);
          return;
        }
        const refused = refuseAadManagement(account, req, segs);
        if (refused) {
          req.resume();
          throw refused;
        }
        if (req.method === "GET" && segs.length === 0) {
          readAccount(account, req, res, opts);
          return;
        }
        if (await handleDocuments(account, req, res, segs)) return;
        if (await handleOffers(account, req, res, segs)) return;
        if (await handleContainerReplace(account, req, res, segs)) return;
        if (await handleResourceCreate(account, req, res, segs)) return;
        if (await handleResourceDelete(account, req, res, segs)) return;
      } catch (err) {
        if (err instanceof CosmosError) {
          req.resume(); // a body left unread (refused before it was read) is drained
          sendError(req, res, err);
          return;
        }
        throw err;
      }
      await handleWithPackage(account, req, res);
    })().catch(err => {
      process.stderr.write(`cosmos local: ${err && err.stack}\n`);
      if (!res.headersSent) send(req, res, 500, { code: "InternalServerError", message: String(err && err.message) });
      else res.end();
    });
  };
}

function parseArgs(argv) {
  const args = { host: "127.0.0.1", port: 0, ssl: true, logRequests: false, cert: null, key: null };
  for (let i = 0; i < argv.length; i += 1) {
    const a = argv[i];
    if (a === "--host") args.host = argv[(i += 1)];
    else if (a === "--port" || a === "-p") args.port = parseInt(argv[(i += 1)], 10);
    else if (a === "--no-ssl") args.ssl = false;
    else if (a === "--log-requests") args.logRequests = true;
    else if (a === "--cert") args.cert = argv[(i += 1)];
    else if (a === "--key") args.key = argv[(i += 1)];
    else if (a === "--state-dir") args.stateDir = argv[(i += 1)];
    else if (a === "--state-file") args.stateFile = argv[(i += 1)]; // the earlier name: DIR.json
    else if (a === "--state-fsync") args.fsync = true;
    else if (a === "--state-compact-bytes") args.compactBytes = parseInt(argv[(i += 1)], 10);
    else if (a === "-h" || a === "--help") {
      process.stdout.write("usage: server.js [--host 127.0.0.1] [--port 0] [--no-ssl] [--log-requests] " +
        "[--state-dir DIR [--state-fsync] [--state-compact-bytes N]]\n");
      process.exit(0);
    }
  }
  if (!Number.isInteger(args.port) || args.port < 0 || args.port > 65535) {
    process.stderr.write("invalid --port\n");
    process.exit(2);
  }
  if (args.compactBytes !== undefined && !(Number.isInteger(args.compactBytes) && args.compactBytes > 0)) {
    process.stderr.write("invalid --state-compact-bytes (a positive number of bytes)\n");
    process.exit(2);
  }
  return args;
}

function createServer(opts = {}) {
  internals.check(); // the packages' internals used here are where they were, or no start
  let account;
  const kept = persistence.open(opts);
  const listener = createRequestListener(() => account, opts);
  const server = opts.ssl === false
    ? http.createServer({ keepAlive: true }, listener)
    : https.createServer(
        {
          cert: fs.readFileSync(opts.cert || path.join(PKG_DIR, "cert.pem")),
          key: fs.readFileSync(opts.key || path.join(PKG_DIR, "key.pem")),
          keepAlive: true
        },
        listener
      );
  server.keepAliveTimeout = 120000;
  server.headersTimeout = 125000;
  server.on("listening", () => {
    const { address, port } = server.address();
    const host = address === "0.0.0.0" || address === "::" ? "localhost" : address;
    account = new Account(host, port);
    account.offers = new Offers(offerRid);
    try {
      persistence.load(account, kept);
    } catch (err) {
      server.close();
      server.emit("error", err);
      return;
    }
  });
  persistence.attach(server, () => account, kept);
  startSweep(server, () => account, () => server.flush());
  server.on("close", () => queryThreads.stop());
  return server;
}

if (require.main === module) {
  const args = parseArgs(process.argv.slice(2));
  let server;
  try {
    server = createServer(args);
  } catch (err) {
    process.stderr.write(`cosmos local: ${err && err.message}\n`);
    process.exit(1);
  }
  server.on("error", err => {
    process.stderr.write(`cosmos local: ${err && err.message}\n`);
    process.exit(1);
  });
  server.listen(args.port, args.host, () => {
    const { port } = server.address();
    const scheme = args.ssl ? "https" : "http";
    const host = args.host.includes(":") ? `[${args.host}]` : args.host;
    process.stdout.write(`${JSON.stringify({ ready: true, port, endpoint: `${scheme}://${host}:${port}/` })}\n`);
  });
  const stop = () => {
    server.flush();
    server.close(() => process.exit(0));
    if (server.closeAllConnections) server.closeAllConnections();
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

module.exports = { createServer };
