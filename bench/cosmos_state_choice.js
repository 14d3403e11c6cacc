"use strict";
/*
 * What one acknowledged write costs in each way the local Cosmos DB endpoint could keep its
 * state (funcstack/cosmos/persistence.js; docs/cosmos.md "Why a journal"), with nothing and
 * with PRELOAD documents of ~1 KB kept: the journal it uses (a JSON line appended with
 * write(2), with and without an fdatasync per write), SQLite (better-sqlite3, WAL, each
 * `synchronous` level) and LMDB (lmdb, a synchronous transaction per write). No Azure
 * counterpart: a measurement for choosing, not a benchmark of the endpoint.
 *
 * The two databases are not funcstack's dependencies; install them in a scratch folder and run
 * from there (Node 20):
 *   mkdir /tmp/choice && cd /tmp/choice && npm init -y && npm install better-sqlite3@12.11.1 lmdb@3.5.6
 *   NODE_PATH=/tmp/choice/node_modules PRELOAD=1000000 N=20000 node <repo>/bench/cosmos_state_choice.js
 * WHICH=journal,sqlite,lmdb picks the candidates; TMPDIR where the files go (~3 GB at 1M).
 */
const fs = require("fs");
const path = require("path");
const os = require("os");

const PRELOAD = parseInt(process.env.PRELOAD || "1000000", 10);
const N = parseInt(process.env.N || "20000", 10);
const dir = fs.mkdtempSync(path.join(process.env.TMPDIR || os.tmpdir(), "state-choice-"));

function doc(i) {
  return {
    id: `doc-${i}`, partitionKey: `p-${i % 1000}`, type: "contact",
    data: { name: { firstName: "Ada", lastName: "Lovelace" }, email: `ada${i}@example.com`,
      description: "x".repeat(800), version: 1 },
    _rid: `rid${i}`, _etag: `"${i}"`, _ts: 1700000000
  };
}

function timeIt(label, fn) {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i += 1) fn(PRELOAD + 10 + i);
  const us = Number(process.hrtime.bigint() - t0) / 1e3 / N;
  console.log(`${label}: ${us.toFixed(2)} us/write`);
  return us;
}

function journal(fsyncEach) {
  const file = path.join(dir, `journal-${fsyncEach}.jsonl`);
  const fd = fs.openSync(file, "a");
  // preload: append PRELOAD lines (the journal's cost cannot depend on them: it only appends)
  let chunk = [];
  for (let i = 0; i < PRELOAD; i += 1) {
    chunk.push(JSON.stringify(doc(i)));
    if (chunk.length === 10000) { fs.writeSync(fd, chunk.join("\n") + "\n"); chunk = []; }
  }
  if (chunk.length) fs.writeSync(fd, chunk.join("\n") + "\n");
  const us = timeIt(`journal, write(2)${fsyncEach ? " + fdatasync each" : ""}, ${PRELOAD} kept`, i => {
    fs.writeSync(fd, JSON.stringify({ l: i, p: [["c", i, 0, doc(i)]] }) + "\n");
    if (fsyncEach) fs.fdatasyncSync(fd);
  });
  fs.closeSync(fd);
  fs.unlinkSync(file);
  return us;
}

function sqlite(sync, preload) {
  const Database = require("better-sqlite3");
  const file = path.join(dir, `s-${sync}-${preload}.db`);
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${sync}`);
  db.exec("create table docs(rid text primary key, col text, lsn integer, body text)");
  const put = db.prepare("insert or replace into docs(rid, col, lsn, body) values (?, ?, ?, ?)");
  const load = db.transaction(n => { for (let i = 0; i < n; i += 1) put.run(`rid${i}`, "c", i, JSON.stringify(doc(i))); });
  const t0 = Date.now();
  load(preload);
  const loadS = (Date.now() - t0) / 1000;
  const us = timeIt(`better-sqlite3 WAL synchronous=${sync}, ${preload} kept (loaded in ${loadS.toFixed(1)} s)`,
    i => put.run(`rid${i}`, "c", i, JSON.stringify(doc(i))));
  db.close();
  for (const f of fs.readdirSync(dir)) if (f.startsWith(`s-${sync}-${preload}.db`)) fs.unlinkSync(path.join(dir, f));
  return us;
}

function lmdb(preload) {
  const { open } = require("lmdb");
  const db = open({ path: path.join(dir, `l-${preload}`), mapSize: 4 * 1024 ** 3, encoding: "string" });
  const t0 = Date.now();
  db.transactionSync(() => { for (let i = 0; i < preload; i += 1) db.putSync(`rid${i}`, JSON.stringify(doc(i))); });
  const loadS = (Date.now() - t0) / 1000;
  const us = timeIt(`lmdb putSync (a synchronous transaction each), ${preload} kept (loaded in ${loadS.toFixed(1)} s)`,
    i => db.putSync(`rid${i}`, JSON.stringify(doc(i))));
  db.close();
  fs.rmSync(path.join(dir, `l-${preload}`), { recursive: true, force: true });
  return us;
}

const which = (process.env.WHICH || "journal,sqlite,lmdb").split(",");
try {
  if (which.includes("journal")) { journal(false); journal(true); }
  if (which.includes("sqlite")) {
    for (const sync of ["OFF", "NORMAL", "FULL"]) sqlite(sync, 0);
    sqlite("NORMAL", PRELOAD);
  }
  if (which.includes("lmdb")) { lmdb(0); lmdb(PRELOAD); }
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
