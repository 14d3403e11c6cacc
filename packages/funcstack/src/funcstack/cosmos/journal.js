"use strict";
/*
 * The state directory of the local Cosmos DB endpoint (persistence.js): a snapshot and an
 * append-only journal of JSON lines. No Azure counterpart (the service is durable); what it
 * gives is the service's promise for a write it acknowledged: it is there after the process
 * dies, because its journal line was written (write(2)) before the answer was sent.
 *
 *   DIR/snapshot-<g>.jsonl   the state when journal <g> began: a header line, then for each
 *                            container a line {"container": <_rid>} and one line per document
 *                            of it, a trailer line {"end": <documents>}
 *   DIR/journal-<g>.jsonl    one line per commit since then, appended (never rewritten)
 *
 * Generation 1 starts with no snapshot (the empty state). Compaction starts generation g+1:
 * new commits go to journal-<g+1>, and snapshot-<g+1> is written beside it in slices between
 * requests (a temporary file, fsync'd, then renamed, and the folder fsync'd), after which
 * generation g's files are removed. The snapshot is fuzzy (documents change while it is
 * written): journal <g+1> holds every change made from its start, and replaying a change is
 * idempotent (a document's latest version, or its absence), so snapshot <g+1> + journal <g+1>
 * is the state whatever the snapshot saw. Reading: the highest complete snapshot (none: the
 * empty state of generation 1), then every journal from its generation on, in order; a
 * last line cut short (a crash while it was written, never acknowledged) is dropped and cut
 * off the file; any other bad line is an error naming the file and line.
 *
 * With `fsync`, commits are also fdatasync'd before they are acknowledged, in groups: the
 * answers that wait for one fdatasync are released together when it completes (group commit).
 */

const fs = require("fs");
const path = require("path");

const FORMAT = "funcstack-cosmos-state";
const VERSION = 3;
const READ_CHUNK = 16 * 1024 * 1024;

class StateError extends Error {}

/**
 * Call `onLine(buf, start, end, lineNumber)` for each complete line of `file` (its bytes are
 * buf[start..end), without the newline, valid during the call: the chunk is reused); returns
 * the byte length of the complete lines and whether an unterminated tail follows them.
 */
function readLines(file, onLine) {
  const fd = fs.openSync(file, "r");
  let buf = Buffer.allocUnsafe(READ_CHUNK);
  let start = 0;
  let end = 0;
  let consumed = 0; // file offset of buf[0]
  let line = 0;
  try {
    for (;;) {
      if (end === buf.length) {
        const size = start > 0 ? buf.length : buf.length * 2;
        if (start > 0) {
          buf.copy(buf, 0, start, end);
        } else {
          const next = Buffer.allocUnsafe(size);
          buf.copy(next, 0, start, end);
          buf = next;
        }
        consumed += start;
        end -= start;
        start = 0;
      }
      const n = fs.readSync(fd, buf, end, buf.length - end, null);
      if (n === 0) break;
      end += n;
      const view = buf.subarray(0, end);
      for (let nl = view.indexOf(10, start); nl !== -1; nl = view.indexOf(10, start)) {
        line += 1;
        onLine(buf, start, nl, line);
        start = nl + 1;
      }
    }
  } finally {
    fs.closeSync(fd);
  }
  return { length: consumed + start, tail: end > start };
}

function fsyncDir(dir) {
  const fd = fs.openSync(dir, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Write all of `text` at the end of `fd` (write(2) until done). */
function writeAll(fd, text) {
  const data = Buffer.from(text, "utf8");
  let off = 0;
  while (off < data.length) off += fs.writeSync(fd, data, off, data.length - off);
  return data.length;
}

class StateDir {
  constructor(dir, { fsync = false } = {}) {
    this.dir = dir;
    this.fsync = fsync;
    this.generation = 1;
    this.fd = null;
    this.journalBytes = 0;
    this.snapshotBytes = 0;
    this.compacting = null; // the promise of a compaction under way
    this.syncing = false;
    this.syncWaiters = [];
    this.nextWaiters = [];
    this.retired = [];
  }

  file(kind, g) {
    return path.join(this.dir, `${kind}-${g}.jsonl`);
  }

  /** Generations present: {snapshots: [g...], journals: [g...]} in ascending order. */
  scan() {
    const snapshots = [];
    const journals = [];
    if (!fs.existsSync(this.dir)) return { snapshots, journals };
    for (const name of fs.readdirSync(this.dir)) {
      const m = /^(snapshot|journal)-(\d+)\.jsonl$/.exec(name);
      if (m) (m[1] === "snapshot" ? snapshots : journals).push(parseInt(m[2], 10));
    }
    const up = (a, b) => a - b;
    return { snapshots: snapshots.sort(up), journals: journals.sort(up) };
  }

  /** Whether the folder holds any state of this format. */
  exists() {
    const { snapshots, journals } = this.scan();
    return snapshots.length > 0 || journals.length > 0;
  }

  /**
   * Read the state: `onHeader(header)` once (null: the empty state); for each line of the
   * snapshot between its header and its end, `onDocument(head, buf, start, end)` for a
   * document line ("<head JSON>\t<document JSON>": the document's bytes are buf[start..end),
   * valid during the call) and `onEntry(value)` for any other; `onCommit(record)` for each journal
   * line in order. Leaves the journal of the current generation open for appending.
   */
  load({ onHeader, onDocument, onEntry, onCommit }) {
    fs.mkdirSync(this.dir, { recursive: true });
    const { snapshots, journals } = this.scan();
    const base = snapshots.length ? snapshots[snapshots.length - 1] : 1;
    if (snapshots.length) {
      const file = this.file("snapshot", base);
      let header = null;
      let trailer = null;
      const read = readLines(file, (buf, start, end, n) => {
        if (trailer !== null) throw new StateError(`${file}:${n}: a line after the snapshot's end`);
        const tab = header === null ? -1 : buf.indexOf(9, start);
        let value;
        try {
          value = JSON.parse(buf.toString("utf8", start, tab !== -1 && tab < end ? tab : end));
        } catch (err) {
          throw new StateError(`${file}:${n}: not JSON (${err.message})`);
        }
        if (tab !== -1 && tab < end) {
          onDocument(value, buf, tab + 1, end);
        } else if (header === null) {
          if (!value || value.format !== FORMAT || value.version !== VERSION) {
            throw new StateError(`${file}:1: not a ${FORMAT} version ${VERSION} snapshot`);
          }
          header = value;
          onHeader(value);
        } else if (value !== null && typeof value === "object" && "end" in value) {
          trailer = value;
        } else {
          onEntry(value);
        }
      });
      if (trailer === null || read.tail) throw new StateError(`${file}: the snapshot has no end line (cut short)`);
      this.snapshotBytes = read.length;
    } else {
      onHeader(null);
    }
    const mine = journals.filter(g => g >= base);
    for (let i = 0; i < mine.length; i += 1) {
      const file = this.file("journal", mine[i]);
      const last = i === mine.length - 1;
      let bad = null;
      const read = readLines(file, (buf, start, end, n) => {
        if (bad !== null) throw new StateError(`${file}:${bad.n}: not JSON (${bad.message})`);
        let record;
        try {
          record = JSON.parse(buf.toString("utf8", start, end));
        } catch (err) {
          bad = { n, message: err.message };
          return;
        }
        onCommit(record);
      });
      let length = read.length;
      if (bad !== null || read.tail) {
        // a commit cut short by a crash (its answer was never sent): only ever the last line
        if (!last || (bad !== null && read.tail)) {
          throw new StateError(`${file}: a damaged line before the end`);
        }
        if (bad !== null) length = this.lengthBeforeLastLine(file, read.length);
        fs.truncateSync(file, length);
        process.stderr.write(`cosmos local state: ${file}: dropped an unfinished last line\n`);
      }
      if (last) this.journalBytes = length;
    }
    this.generation = mine.length ? mine[mine.length - 1] : base;
    // what an earlier compaction left behind
    for (const g of snapshots) if (g < base) fs.rmSync(this.file("snapshot", g), { force: true });
    for (const g of journals) if (g < base) fs.rmSync(this.file("journal", g), { force: true });
    for (const name of fs.readdirSync(this.dir)) {
      if (name.endsWith(".tmp")) fs.rmSync(path.join(this.dir, name), { force: true });
    }
    this.fd = fs.openSync(this.file("journal", this.generation), "a");
    if (!mine.length) fsyncDir(this.dir);
  }

  /** The length of `file` without its last complete line (`length` = end of complete lines). */
  lengthBeforeLastLine(file, length) {
    const fd = fs.openSync(file, "r");
    try {
      const size = Math.min(length, 64 * 1024 * 1024);
      const buf = Buffer.allocUnsafe(size);
      fs.readSync(fd, buf, 0, size, length - size);
      const nl = buf.subarray(0, size - 1).lastIndexOf(10);
      return nl === -1 ? length - size : length - size + nl + 1;
    } finally {
      fs.closeSync(fd);
    }
  }

  /** Append one commit (a JSON-able record) before it is acknowledged. */
  append(record) {
    this.appendLine(JSON.stringify(record));
  }

  /** Append one commit given as its JSON text (one line) before it is acknowledged. */
  appendLine(json) {
    const text = `${json}\n`;
    try {
      this.journalBytes += writeAll(this.fd, text);
    } catch (err) {
      // leave no partial line behind a failed write: the next commit starts a line of its own
      try {
        fs.ftruncateSync(this.fd, this.journalBytes);
      } catch (ignored) {
        // the error below says what failed
      }
      throw err;
    }
  }

  /**
   * `done()` once what was appended so far is on disk: at once without `fsync`; otherwise
   * after an fdatasync shared by every commit appended before it starts (group commit).
   */
  whenDurable(done) {
    if (!this.fsync) {
      done();
      return;
    }
    if (this.syncing) {
      this.nextWaiters.push(done);
      return;
    }
    this.syncWaiters.push(done);
    this.startSync();
  }

  startSync() {
    this.syncing = true;
    const waiters = this.syncWaiters;
    this.syncWaiters = [];
    fs.fdatasync(this.fd, err => {
      if (err) process.stderr.write(`cosmos local state: fdatasync: ${err.message}\n`);
      this.syncing = false;
      this.retired.forEach(old => fs.closeSync(old));
      this.retired = [];
      waiters.forEach(w => w());
      if (this.nextWaiters.length) {
        this.syncWaiters = this.nextWaiters;
        this.nextWaiters = [];
        this.startSync();
      }
    });
  }

  /**
   * Start generation g+1 and write its snapshot in slices: `header` (the state's header
   * as of now) then the strings `chunks` yields (document lines, each ending in a newline)
   * and `trailer`, one chunk per turn of the event loop. Resolves when the old generation is
   * gone; rejects (leaving the state as it was: both journals) on an I/O error.
   */
  compact(header, chunks, trailer) {
    if (this.compacting) return this.compacting;
    const next = this.generation + 1;
    const journal = this.file("journal", next);
    const fd = fs.openSync(journal, "a");
    fsyncDir(this.dir);
    const oldFd = this.fd;
    const old = this.generation;
    // commits from now on go to the new journal
    this.fd = fd;
    this.generation = next;
    this.journalBytes = 0;
    if (this.fsync) fs.fdatasyncSync(oldFd); // what waits for durability was written there
    if (this.syncing) this.retired.push(oldFd); // closed once the fdatasync under way is done
    else fs.closeSync(oldFd);
    const target = this.file("snapshot", next);
    const tmp = `${target}.tmp`;
    this.compacting = new Promise((resolve, reject) => {
      let out;
      let bytes = 0;
      const fail = err => {
        if (out !== undefined) fs.closeSync(out);
        fs.rmSync(tmp, { force: true });
        this.compacting = null;
        reject(err);
      };
      try {
        out = fs.openSync(tmp, "w");
        bytes += writeAll(out, `${JSON.stringify({ format: FORMAT, version: VERSION, ...header })}\n`);
      } catch (err) {
        fail(err);
        return;
      }
      const iterator = chunks[Symbol.iterator]();
      const step = () => {
        if (this.fd === null) {
          fail(new Error("the endpoint stopped"));
          return;
        }
        try {
          const { value, done } = iterator.next();
          if (!done) {
            bytes += writeAll(out, value);
            setImmediate(step);
            return;
          }
          bytes += writeAll(out, `${JSON.stringify(trailer())}\n`);
        } catch (err) {
          fail(err);
          return;
        }
        fs.fsync(out, err => {
          if (err) {
            fail(err);
            return;
          }
          try {
            fs.closeSync(out);
            out = undefined;
            fs.renameSync(tmp, target);
            fsyncDir(this.dir);
            fs.rmSync(this.file("snapshot", old), { force: true });
            fs.rmSync(this.file("journal", old), { force: true });
          } catch (e) {
            fail(e);
            return;
          }
          this.snapshotBytes = bytes;
          this.compacting = null;
          resolve();
        });
      };
      setImmediate(step);
    });
    return this.compacting;
  }

  /** The same as compact(), written at once (a converted state file, before any request). */
  compactNow(header, chunks, trailer) {
    const next = this.generation + 1;
    const target = this.file("snapshot", next);
    const tmp = `${target}.tmp`;
    const out = fs.openSync(tmp, "w");
    let bytes = 0;
    try {
      bytes += writeAll(out, `${JSON.stringify({ format: FORMAT, version: VERSION, ...header })}\n`);
      for (const chunk of chunks) bytes += writeAll(out, chunk);
      bytes += writeAll(out, `${JSON.stringify(trailer())}\n`);
      fs.fsyncSync(out);
    } finally {
      fs.closeSync(out);
    }
    fs.renameSync(tmp, target);
    const fd = fs.openSync(this.file("journal", next), "a");
    fsyncDir(this.dir);
    if (this.fd !== null) fs.closeSync(this.fd);
    fs.rmSync(this.file("journal", this.generation), { force: true });
    fs.rmSync(this.file("snapshot", this.generation), { force: true });
    this.fd = fd;
    this.generation = next;
    this.journalBytes = 0;
    this.snapshotBytes = bytes;
  }

  close() {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
  }
}

module.exports = { StateDir, StateError, FORMAT, VERSION };
