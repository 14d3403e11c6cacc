"use strict";
/*
 * State across restarts of the local Cosmos DB endpoint (server.js), with --state-file FILE:
 * no Azure counterpart (the service is durable); what it keeps is what the service would
 * still answer after a restart: every database, container and live document with its LSN and
 * modification time, the offers, the account's LSN and the counters that make resource ids,
 * so the same _rid / _self / _etag values come back (the SDK's change feed continuations and
 * the Functions trigger's leases name a container by its _rid).
 *
 * The interface server.js uses:
 *   - load(account, file): start from the file, if there is one (restore);
 *   - attach(server, getAccount, file): any request that may write (not GET / HEAD) marks
 *     the state dirty; a dirty state is written within STATE_FLUSH_MS, and once more by
 *     server.flush() on stop; without a file, server.flush() does nothing;
 *   - snapshot(account) / restore(account, state): the state as one JSON-able object;
 *   - persist(account, file): the snapshot written atomically (temporary file, then rename).
 */

const fs = require("fs");
const path = require("path");
const { serviceRid } = require("./ids");
const { withContainerDefaults } = require("./settings");
const { DEFAULT_CONTAINER_THROUGHPUT } = require("./offers");
const { lsnOf, stampAs } = require("./store");
const globalLsn = require("./lsn");

const STATE_FLUSH_MS = 500;
const STATE_VERSION = 2;

/** Every database, container and live document with its LSN, the offers, and the counters
 * that make resource ids, so a restart restores the same _rid / _self / _etag values (the
 * SDK's change feed continuations and the trigger's leases name the container by its _rid). */
function snapshot(account) {
  const dbs = [];
  for (const dbItem of account.databases._data.values()) {
    const db = dbItem.read();
    if (!db) continue;
    const colls = [];
    for (const colItem of dbItem.collections._data.values()) {
      const col = colItem.read();
      if (!col) continue;
      const docs = [];
      for (const item of colItem.documents._data.values()) {
        const doc = item.read();
        if (doc) docs.push({ body: doc, lsn: lsnOf(doc), mtime: doc.__mtime || 0 });
      }
      colls.push({ body: col, ridCount: colItem.documents._ridCount, docs });
    }
    dbs.push({ body: db, ridCount: dbItem.collections._ridCount, colls });
  }
  return {
    version: STATE_VERSION, globalLsn: globalLsn.current(), ridCount: account.databases._ridCount, dbs,
    offers: account.offers.snapshot()
  };
}

/**
 * Load a snapshot. A version 1 file (written before this endpoint used the service's
 * resource-id encoding, filled in container settings and kept offers) is migrated: '/' in
 * resource ids becomes '-' (the same ids, in the service's encoding; _self links follow),
 * containers get the service's default settings, and every container without throughput of
 * its own in a database without shared throughput gets the default 400 RU/s offer it would
 * have had. Ids and LSNs are otherwise kept as they were.
 */
function restore(account, state) {
  if (!state || (state.version !== 1 && state.version !== STATE_VERSION)) {
    throw new Error("unknown state file version");
  }
  const migrating = state.version === 1;
  globalLsn.set(state.globalLsn);
  account.databases._ridCount = state.ridCount;
  if (!migrating) account.offers.restore(state.offers);
  for (const d of state.dbs) {
    const dbBody = migrating ? migratedIds(d.body, null, "dbs") : d.body;
    account.databases._set(dbBody);
    const dbItem = account.database(dbBody.id);
    dbItem.collections._ridCount = d.ridCount;
    for (const c of d.colls) {
      const colBody = migrating ? withContainerDefaults(migratedIds(c.body, dbBody, "colls")) : c.body;
      dbItem.collections._set(colBody);
      const colItem = dbItem.collection(colBody.id);
      colItem.documents._ridCount = c.ridCount;
      if (migrating) account.offers.create(colItem.read(), { manual: DEFAULT_CONTAINER_THROUGHPUT });
      for (const x of c.docs) {
        const doc = migrating ? migratedIds(x.body, colBody, "docs") : x.body;
        colItem.documents._set(doc);
        stampAs(doc, x.lsn, x.mtime);
      }
    }
  }
}

/** A version 1 body with its _rid in the service's encoding and its _self rebuilt from it. */
function migratedIds(body, parent, kind) {
  const rid = serviceRid(body._rid);
  let self;
  if (kind === "dbs") self = `/dbs/${rid}`;
  else if (kind === "colls") self = `${parent._self}/colls/${rid}`;
  else self = `${parent._self}/docs/${rid}/`;
  return { ...body, _rid: rid, _self: self };
}

/** Write the snapshot atomically (temporary file, then rename). */
function persist(account, file) {
  const tmp = `${file}.tmp`;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(tmp, JSON.stringify(snapshot(account)));
  fs.renameSync(tmp, file);
}

/** Start the account from the state file, when it exists. */
function load(account, file) {
  if (file && fs.existsSync(file)) {
    restore(account, JSON.parse(fs.readFileSync(file, "utf8")));
  }
}

/**
 * With a state file, any change is written within STATE_FLUSH_MS, and once more on stop
 * (`server.flush()`); `server.dirty` says whether a change is not written yet.
 */
function attach(server, getAccount, file) {
  server.dirty = false;
  if (file) {
    server.on("request", (req, res) => {
      if (req.method !== "GET" && req.method !== "HEAD") res.on("finish", () => { server.dirty = true; });
    });
    const flusher = setInterval(() => server.flush(), STATE_FLUSH_MS);
    flusher.unref();
    server.on("close", () => clearInterval(flusher));
  }
  server.flush = () => {
    const account = getAccount();
    if (!file || !account || !server.dirty) return;
    server.dirty = false;
    try {
      persist(account, file);
    } catch (err) {
      server.dirty = true;
      process.stderr.write(`cosmos local state: ${err && err.stack}\n`);
    }
  };
}

module.exports = { snapshot, restore, persist, load, attach, STATE_VERSION };
