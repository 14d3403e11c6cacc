"use strict";
/*
 * State across restarts of the local Cosmos DB endpoint (server.js), with --state-dir DIR:
 * no Azure counterpart (the service is durable); what it keeps is what the service would
 * still answer after a restart, and when: a write the endpoint acknowledged is there after
 * its process is killed (SIGKILL included), as a write the service acknowledged is durable
 * (its replica set commits a write with a majority quorum before answering: "Global data
 * distribution with Azure Cosmos DB - under the hood", learn.microsoft.com).
 * Kept: every database, container (settings, physical partitions and each one's LSN) and live
 * document with its LSN and modification time, the offers and the counters that make resource
 * ids, so the same
 * _rid / _self / _etag values come back (the SDK's change feed continuations and the
 * Functions trigger's leases name a container by its _rid). Not kept: UDFs.
 *
 * How (journal.js has the files): every request's changes are one commit, appended to the
 * journal (write(2)) before its answer is sent; the answer waits for nothing else, so a
 * write costs the same whatever the endpoint holds. store.js reports each document version
 * written or removed (`observe`); at the answer the journal gets the latest version of each
 * (or its absence), the container's resource-id counter and its ranges' LSNs, and, after a request
 * that may change databases, containers or offers (any method but GET / HEAD outside
 * .../docs), the account's metadata when it changed. When the journal has grown past
 * max(64 MB, half the snapshot) (or --state-compact-bytes N, when given), a new snapshot is
 * written in slices between requests. With --state-fsync each answer also waits for an
 * fdatasync shared by the commits before it (group commit): durable across a power cut too.
 * A restart reads each snapshot line's head (what the indexes need) and keeps the document's
 * JSON as read, as every document is kept (store.js StoredDocument): nothing is parsed.
 *
 * The earlier format, one JSON file rewritten whole every 0.5 s (versions 1 and 2, at
 * DIR.json: `.funcstack/state/cosmos.json` beside `.funcstack/state/cosmos/`), is read once,
 * converted into DIR and removed; a version 1 file is migrated on the way (`restore`).
 *
 * The interface server.js uses: `open(opts)` (null without a state directory),
 * `load(account, kept)` when the account exists, `attach(server, getAccount, kept)`.
 */

const fs = require("fs");
const { StateDir, StateError } = require("./journal");
const { serviceRid } = require("./ids");
const { withContainerDefaults } = require("./settings");
const { DEFAULT_CONTAINER_THROUGHPUT } = require("./offers");
const {
  StoredDocument, storedOf, keepAsText, compactJsonOf, packageKeyOf, stampAs, observe, collections, indexes,
  docPartitionComponents
} = require("./store");
const { pathSegments } = require("./requests");
const { STATE, rangesOf, startLsnsAt } = require("./ranges");

/** The journal's size that starts a compaction (a snapshot), unless the snapshot's half is more. */
const COMPACT_MIN_BYTES = 64 * 1024 * 1024;
/** About this many bytes of document lines are written per turn of the event loop. */
const SNAPSHOT_SLICE_BYTES = 1024 * 1024;
const LEGACY_VERSIONS = [1, 2];

// ---------------------------------------------------------------- the account's metadata

/** Databases, containers (bodies and resource-id counters) and offers: all but documents. */
function metaOf(account) {
  const dbs = [];
  for (const dbItem of account.databases._data.values()) {
    const db = dbItem.read();
    if (!db) continue;
    const colls = [];
    for (const colItem of dbItem.collections._data.values()) {
      const col = colItem.read();
      if (col) colls.push({ body: col, ridCount: colItem.documents._ridCount });
    }
    dbs.push({ body: db, ridCount: dbItem.collections._ridCount, colls });
  }
  return { ridCount: account.databases._ridCount, offers: account.offers.snapshot(), dbs };
}

function containerRids(meta) {
  const rids = new Set();
  for (const d of meta.dbs) for (const c of d.colls) rids.add(c.body._rid);
  return rids;
}

// ---------------------------------------------------------------- reading: replay, then build

/**
 * The state as read: the latest metadata, and for each container the snapshot's documents
 * (in its order) and what the journals changed since (by _rid, in the order of the changes:
 * a version, or null for a deletion). Documents go into the account once, at `build`.
 */
class Replay {
  constructor() {
    this.lsn = 0;
    this.meta = null;
    this.cols = new Map(); // container _rid -> {ridCount, base: [stamped body], changed: Map}
    this.current = null; // the container whose snapshot lines are being read
  }

  header(header) {
    this.lsn = header.lsn || 0; // the account's one LSN, in a state kept before ranges had theirs
    this.applyMeta(header.meta);
  }

  applyMeta(meta) {
    const rids = containerRids(meta);
    for (const d of meta.dbs) {
      for (const c of d.colls) {
        const kept = this.cols.get(c.body._rid);
        const lsns = (c.body[STATE] && c.body[STATE].lsns) || null;
        if (kept) {
          kept.ridCount = Math.max(kept.ridCount, c.ridCount);
          kept.body = c.body;
          if (lsns) kept.lsns = lsns;
        } else {
          this.cols.set(c.body._rid, { ridCount: c.ridCount, base: [], changed: new Map(), body: c.body, lsns });
        }
      }
    }
    for (const rid of this.cols.keys()) if (!rids.has(rid)) this.cols.delete(rid);
    this.meta = meta;
  }

  /** A snapshot line other than a document's: {"container": _rid} before its documents. */
  entry(value) {
    this.current = (value && this.cols.get(value.container)) || null;
  }

  /**
   * A snapshot's document line of the current container: its head [lsn, mtime, _rid, own
   * ttl, id, [the value the package keys it by] ([] for none), values of the other unique keys
   * (or null), [its partition key's first component] (only where it is not the former)] and
   * its JSON's bytes, kept as its text (a copy: the chunk read is not held).
   */
  document(head, bytes, start, end) {
    if (!this.current) return;
    const [lsn, mtime, rid, ttl, id, partition, unique, first] = head;
    const f = first || partition;
    const json = compactJsonOf(bytes, start, end);
    let parts = null;
    const paths = ((this.current.body.partitionKey || {}).paths) || [];
    if (paths.length > 1) { // a hierarchical key: its other components are read from the JSON
      const text = typeof json === "string" ? json : json.toString("utf8");
      parts = docPartitionComponents(this.current.body, JSON.parse(text));
    }
    this.current.base.push(new StoredDocument(rid, json, lsn, mtime, ttl, id, f.length ? f[0] : undefined, parts,
      unique || null));
  }

  commit(record) {
    if (record.m) this.applyMeta(record.m);
    for (const [rid, count] of Object.entries(record.c || {})) {
      const kept = this.cols.get(rid);
      if (kept) kept.ridCount = Math.max(kept.ridCount, count);
    }
    // a change moves a document to the end, as the package's replace does
    for (const [colRid, lsn, mtime, body] of record.p || []) {
      const kept = this.cols.get(colRid);
      if (!kept) continue; // its container was deleted
      kept.changed.delete(body._rid);
      kept.changed.set(body._rid, stampAs(body, lsn, mtime));
    }
    for (const [colRid, rid] of record.d || []) {
      const kept = this.cols.get(colRid);
      if (!kept) continue;
      kept.changed.delete(rid);
      kept.changed.set(rid, null);
    }
    // each range's LSN after the commit ({container: {range: lsn}})
    for (const [colRid, lsns] of Object.entries(record.r || {})) {
      const kept = this.cols.get(colRid);
      if (kept) kept.lsns = lsns;
    }
    this.lsn = Math.max(this.lsn, record.l || 0);
  }

  /** Put the state into a new account; returns the number of documents. */
  build(account) {
    const meta = this.meta;
    if (!meta) return 0;
    account.databases._ridCount = meta.ridCount;
    account.offers.restore(meta.offers);
    for (const d of meta.dbs) {
      account.databases._set(d.body);
      const dbItem = account.database(d.body.id);
      dbItem.collections._ridCount = d.ridCount;
      for (const c of d.colls) {
        dbItem.collections._set(c.body);
        const colItem = dbItem.collection(c.body.id);
        const kept = this.cols.get(c.body._rid);
        const docs = colItem.documents;
        docs._ridCount = Math.max(c.ridCount, kept.ridCount);
        const { base, changed } = kept;
        kept.base = null;
        kept.changed = null;
        for (const item of base) if (!changed.has(item.rid)) setKept(docs, item);
        for (const body of changed.values()) if (body) docs._set(body);
        keepAsText(colItem); // the journals' versions too
        if (kept.lsns) rangesOf(colItem).lsns = { ...kept.lsns };
        else startLsnsAt(colItem, this.lsn); // kept with the account's one LSN: each range from it
        indexes(colItem); // built now rather than by the first request
      }
    }
    let documents = 0;
    for (const colItem of collections(account)) documents += colItem.documents._data.size;
    return documents;
  }
}

/**
 * Put a kept document into the package's documents as its `_set` does (the index entry of
 * each unique key path, "/id" last, then the item by _rid), from what its head says.
 */
function setKept(docs, item) {
  const paths = docs._uniqueKeyPaths;
  const key = packageKeyOf(docs, item);
  for (let i = 0; i < paths.length; i += 1) {
    const value = i === paths.length - 1 ? item.id : (item.unique || [])[i];
    docs._index.set(docs._getId(paths[i], value, key), item.rid);
  }
  docs._data.set(item.rid, item);
}

/** The head of a document's snapshot line (see Replay.document). */
function headOf(docs, item) {
  const key = packageKeyOf(docs, item);
  const head = [item.lsn, item.mtime, item.rid, item.ttl, item.id, key === undefined ? [] : [key]];
  const firstDiffers = JSON.stringify(item.key) !== JSON.stringify(key);
  if (item.unique || firstDiffers) head.push(item.unique);
  if (firstDiffers) head.push(item.key === undefined ? [] : [item.key]);
  return head;
}

/** An item of the package's documents as a StoredDocument (null: none). */
function storedItem(docs, item) {
  if (item instanceof StoredDocument) return item;
  const doc = item.read();
  return doc ? storedOf(docs, docs._parent.read(), doc) : null;
}

// ---------------------------------------------------------------- the earlier format

/**
 * Load a state of the earlier format (one JSON object). A version 1 file (written before this
 * endpoint used the service's resource-id encoding, filled in container settings and kept
 * offers) is migrated: '/' in resource ids becomes '-' (the same ids, in the service's
 * encoding; _self links follow), containers get the service's default settings, and every
 * container without throughput of its own in a database without shared throughput gets the
 * default 400 RU/s offer it would have had. Ids and LSNs are otherwise kept as they were.
 */
function restore(account, state) {
  if (!state || !LEGACY_VERSIONS.includes(state.version)) {
    throw new StateError(`unknown state file version ${JSON.stringify(state && state.version)}`);
  }
  const migrating = state.version === 1;
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
      startLsnsAt(colItem, state.globalLsn); // every range goes on from the account's one LSN
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

// ---------------------------------------------------------------- writing

/**
 * The lines of a snapshot of `containers` ([[_rid, collection], ...], taken when it starts):
 * for each, {"container": _rid} then "<head>\t<document JSON>" per document (its text as
 * kept); strings of about SNAPSHOT_SLICE_BYTES; `counted()` for each document.
 */
function* snapshotLines(containers, counted) {
  let parts = [];
  let bytes = 0;
  for (const [rid, colItem] of containers) {
    const docs = colItem.documents;
    parts.push(JSON.stringify({ container: rid }));
    // a live iterator: documents written meanwhile may be seen (the journal has them too)
    for (const item of docs._data.values()) {
      const stored = storedItem(docs, item);
      if (!stored) continue;
      const line = `${JSON.stringify(headOf(docs, stored))}\t${stored.text()}`;
      parts.push(line);
      bytes += line.length;
      counted();
      if (bytes >= SNAPSHOT_SLICE_BYTES) {
        yield `${parts.join("\n")}\n`;
        parts = [];
        bytes = 0;
      }
    }
  }
  if (parts.length) yield `${parts.join("\n")}\n`;
}

/** The state kept in one directory: what server.js holds while it runs. */
class Kept {
  constructor({ dir, legacyFile, fsync, compactBytes }) {
    this.dir = new StateDir(dir, { fsync });
    this.legacyFile = legacyFile;
    this.compactBytes = compactBytes;
    this.dirty = new Map(); // collection -> Set of document _rids changed since the last commit
    this.metaText = "";
    this.knownContainers = new Set();
  }

  touch(collection, rid) {
    let rids = this.dirty.get(collection);
    if (!rids) {
      rids = new Set();
      this.dirty.set(collection, rids);
    }
    rids.add(rid);
  }

  load(account) {
    const started = Date.now();
    const cpu = process.cpuUsage();
    const converting = !this.dir.exists() && this.legacyFile && fs.existsSync(this.legacyFile);
    const replay = new Replay();
    this.dir.load({
      onHeader: header => header && replay.header(header),
      onDocument: (head, bytes, start, end) => replay.document(head, bytes, start, end),
      onEntry: value => replay.entry(value),
      onCommit: record => replay.commit(record)
    });
    let documents;
    if (converting) {
      restore(account, JSON.parse(fs.readFileSync(this.legacyFile, "utf8")));
      for (const colItem of collections(account)) keepAsText(colItem);
      let count = 0;
      this.dir.compactNow(this.header(account), snapshotLines(this.containers(account), () => { count += 1; }),
        () => ({ end: count }));
      fs.rmSync(this.legacyFile);
      documents = count;
      process.stderr.write(`cosmos local state: converted ${this.legacyFile} into ${this.dir.dir}\n`);
    } else {
      documents = replay.build(account);
      if (this.legacyFile && fs.existsSync(this.legacyFile)) {
        process.stderr.write(`cosmos local state: ${this.legacyFile} ignored: ${this.dir.dir} holds the state ` +
          "(it was converted before; remove the file)\n");
      }
    }
    this.remember(metaOf(account));
    observe((collection, rid) => this.touch(collection, rid));
    const heap = Math.round(process.memoryUsage().heapUsed / 1048576);
    const used = process.cpuUsage(cpu);
    process.stderr.write(`cosmos local state: ${documents} documents from ${this.dir.dir} in ` +
      `${Date.now() - started} ms (CPU ${Math.round((used.user + used.system) / 1000)} ms, heap ${heap} MB)\n`);
    this.maybeCompact(account);
  }

  remember(meta) {
    this.metaText = JSON.stringify(meta);
    this.knownContainers = containerRids(meta);
  }

  header(account) {
    return { meta: metaOf(account) }; // each container's ranges keep their LSNs in its body
  }

  containers(account) {
    const out = [];
    for (const colItem of collections(account)) {
      const col = colItem.read();
      if (col) out.push([col._rid, colItem]);
    }
    return out;
  }

  /**
   * Append what changed since the last commit (one journal line), before the answer.
   * `checkMeta`: the request may have changed databases, containers or offers.
   */
  commit(account, checkMeta) {
    if (!account) return;
    let needMeta = checkMeta;
    const counts = {};
    const lsns = {};
    const puts = [];
    const dels = [];
    for (const [collection, rids] of this.dirty) {
      const col = collection.read();
      if (!col) continue;
      if (!this.knownContainers.has(col._rid)) needMeta = true;
      counts[col._rid] = collection.documents._ridCount;
      if (col[STATE] && col[STATE].lsns) lsns[col._rid] = col[STATE].lsns;
      for (const rid of rids) {
        const item = collection.documents._data.get(rid);
        const stored = item && storedItem(collection.documents, item);
        // [container, lsn, mtime, document]: the document's JSON as kept, written as it is
        if (stored) puts.push(`[${JSON.stringify(col._rid)},${stored.lsn},${stored.mtime},${stored.text()}]`);
        else dels.push([col._rid, rid]);
      }
    }
    let meta = null;
    if (needMeta) {
      const m = metaOf(account);
      if (JSON.stringify(m) !== this.metaText) meta = m;
    }
    if (!puts.length && !dels.length && meta === null) {
      this.dirty.clear();
      return;
    }
    // {"m": meta, "c": counts, "r": ranges' LSNs, "p": puts, "d": dels}, the absent ones left
    // out ("l", the account's one LSN, in journals written before ranges had theirs)
    const parts = [];
    if (meta !== null) parts.push(`"m":${JSON.stringify(meta)}`);
    if (puts.length || dels.length) parts.push(`"c":${JSON.stringify(counts)}`, `"r":${JSON.stringify(lsns)}`);
    let line = `{${parts.join(",")}`;
    if (puts.length) line += `,"p":[${puts.join(",")}]`;
    if (dels.length) line += `,"d":${JSON.stringify(dels)}`;
    this.dir.appendLine(`${line}}`); // throws: nothing is cleared, the next commit has it all
    this.dirty.clear();
    if (meta !== null) this.remember(meta);
    this.maybeCompact(account);
  }

  maybeCompact(account) {
    if (this.dir.compacting || this.closed) return;
    const threshold = this.compactBytes === null
      ? Math.max(COMPACT_MIN_BYTES, this.dir.snapshotBytes / 2) : this.compactBytes;
    if (this.dir.journalBytes < threshold || this.dir.journalBytes === 0) return;
    let count = 0;
    const started = Date.now();
    this.dir.compact(this.header(account), snapshotLines(this.containers(account), () => { count += 1; }),
      () => ({ end: count }))
      .then(() => {
        process.stderr.write(`cosmos local state: snapshot ${this.dir.generation} of ${count} documents ` +
          `(${Math.round(this.dir.snapshotBytes / 1048576)} MB) written in ${Date.now() - started} ms\n`);
        this.maybeCompact(account); // the journal may have grown past the mark meanwhile
      })
      .catch(err => {
        if (!this.closed) process.stderr.write(`cosmos local state: compaction failed: ${err && err.stack}\n`);
      });
  }

  close() {
    this.closed = true;
    this.dir.close();
  }
}

/** The state directory server.js was given (--state-dir, or --state-file's earlier name), or null. */
function open(opts) {
  let dir = opts.stateDir;
  let legacyFile = null;
  if (!dir && opts.stateFile) dir = String(opts.stateFile).replace(/\.json$/, "");
  if (dir) legacyFile = `${dir}.json`;
  if (!dir) return null;
  const compactBytes = opts.compactBytes === undefined ? null : opts.compactBytes;
  return new Kept({ dir, legacyFile, fsync: Boolean(opts.fsync), compactBytes });
}

/** Start the account from the kept state, if any. */
function load(account, kept) {
  if (!kept) return;
  try {
    kept.load(account);
  } catch (err) {
    throw new StateError(`cannot read the kept state in ${kept.dir.dir}: ${err && err.message} ` +
      "(start with a fresh state, e.g. funcstack run --fresh, or move the folder away)");
  }
}

function isDocumentPath(url) {
  const segs = pathSegments(url);
  return segs[0] === "dbs" && segs[2] === "colls" && segs[4] === "docs";
}

/**
 * Every answer waits until the request's changes are in the journal (and on disk with
 * --state-fsync). A commit that cannot be written turns the answer into a 500 naming the
 * state directory: the change is applied in memory but was not kept, and is written with the
 * next commit. `server.flush()` commits what is pending (the sweep's deletes; on stop).
 */
function attach(server, getAccount, kept) {
  server.flush = () => {
    if (kept) kept.commit(getAccount(), false);
  };
  if (!kept) return;
  server.prependListener("request", (req, res) => {
    const checkMeta = req.method !== "GET" && req.method !== "HEAD" && !isDocumentPath(req.url);
    const end = res.end;
    res.end = function endAfterCommit(...args) {
      res.end = end;
      try {
        kept.commit(getAccount(), checkMeta);
      } catch (err) {
        process.stderr.write(`cosmos local state: cannot write ${kept.dir.dir}: ${err && err.stack}\n`);
        if (!res.headersSent) {
          res.statusCode = 500;
          res.removeHeader("etag");
          return end.call(res, JSON.stringify({
            code: "InternalServerError",
            message: `The local endpoint could not write its state to ${kept.dir.dir} (${err && err.message}): ` +
              "the change was not kept."
          }));
        }
      }
      kept.dir.whenDurable(() => end.apply(res, args));
      return res;
    };
  });
  server.on("close", () => kept.close());
}

module.exports = { open, load, attach, restore, metaOf, COMPACT_MIN_BYTES };
