"use strict";
/*
 * The query threads of the local Cosmos DB endpoint: where the query engine evaluates a query
 * on the documents queryrun.js selected (queryengine.js), so that the endpoint's main thread,
 * which answers every request, is not held by it. A point read, a write or a change feed poll
 * of another client waits at most for the main thread's share of a query, gathered in slices
 * (walking an index, looking each document up, copying its text: about a microsecond a
 * document of 1 KB), not for the engine's (parsing each document and running the query on
 * it: a few microseconds more, in the thread, on another core where there is one). The
 * service serves point reads beside queries the same way: a query's cost is its own.
 *
 * Two lanes, each a worker thread started when first needed: queries run in the first; one
 * whose plan walks more than BACKGROUND_DOCUMENTS documents (a scan: no index serves its
 * filter) in the second, so that a long query does not hold up the short ones. The second
 * thread could run at a lower priority (BACKGROUND_NICE, where the system lets a thread have
 * its own); it runs at the endpoint's: at nice 10 a scan's thread was starved by a loaded
 * machine's other processes, not only by the endpoint's main thread (in a make test run at a
 * load average of 14, an app's bounded status route, a scan of 30,000 documents, went past
 * its 4 s bound), and what a point read waits for beside a scan is the main thread's share
 * anyway. A task is plain data, what `evaluate` of queryengine.js takes (the query's text and
 * parameters, its code as the main thread's engine generated it, the UDFs' source), its
 * documents handed over as their JSON's bytes: copied into a shared buffer (one copy, a few
 * tenths of a microsecond for 1 KB; a structured clone of the strings costs about three times
 * that on the main thread) and read as text in the thread. A thread that
 * cannot be started leaves the engine in the main thread (one line in the log says so); one
 * that dies fails the tasks it had (the queries answer 500) and is started again for the next.
 */

const os = require("os");
const { Worker, isMainThread, parentPort, workerData } = require("worker_threads");

/** A query whose plan walks more documents than this runs in the background lane. */
const BACKGROUND_DOCUMENTS = 10000;
/** A task the engine is known to do in this many microseconds or less is done in the main thread. */
const INLINE_US = 500;
/**
 * A task of a query whose cost is not known yet, calling no UDF, over this many documents (one
 * chunk of the engine's) of this much JSON or less is done in the main thread too: the engine's
 * cost a document is a few microseconds (tens for a large one), and a query thread's start
 * costs about 0.07 s of CPU, which an endpoint whose queries read a few documents each (most
 * of a test run's) then never spends.
 */
const INLINE_DOCUMENTS = 32;
const INLINE_CHARS = 64 * 1024;
/** The background lane's niceness (Linux: per thread; 0..19, higher is lower priority). */
const BACKGROUND_NICE = 0;
const ROLE = "funcstack cosmos query thread";
/** A query thread's young generation (V8's default is about 3 times this). */
const YOUNG_GENERATION_MB = 8;

if (!isMainThread && workerData && workerData.role === ROLE) {
  // a query thread: evaluate each task, answer with its result
  if (workerData.nice) {
    try {
      os.setPriority(workerData.nice); // this thread only, on Linux
    } catch (err) {
      // a system that does not let the thread lower its priority: it runs as the others
    }
  }
  const { evaluate } = require("./queryengine"); // eslint-disable-line global-require
  parentPort.on("message", ({ id, task }) => {
    let result;
    try {
      const started = process.hrtime.bigint();
      result = evaluate({ ...task, chunks: unpacked(task.packed) });
      result.us = Number(process.hrtime.bigint() - started) / 1e3;
      // rows go back as their JSON: a structured clone of objects costs ten times more (about
      // 290 against 30 us a round trip for a page of 100 small rows)
      for (const key of ["rows", "result"]) {
        if (Array.isArray(result[key])) {
          result[`${key}Json`] = JSON.stringify(result[key]);
          delete result[key];
        }
      }
    } catch (err) {
      result = { failed: String((err && err.stack) || err) };
    }
    parentPort.postMessage({ id, result });
  });
}

let inline = null; // the engine in this thread, once a worker could not be started

/** Shared buffers a task's documents are copied into: this size, kept for the next task. */
const BUFFER_BYTES = 1024 * 1024;
const BUFFERS_KEPT = 8;
const free = [];

/**
 * The documents of a task's chunks (stored documents: `json`, a string of Latin-1 text or
 * UTF-8 bytes) in one shared buffer: {buffer, bounds (start, end of each), wide (1: UTF-8,
 * 0: Latin-1), sizes (documents per chunk)}.
 */
function packed(chunks) {
  let documents = 0;
  let bytes = 0;
  for (const chunk of chunks) {
    for (const item of chunk) {
      documents += 1;
      bytes += item.json.length;
    }
  }
  const buffer = bytes <= BUFFER_BYTES && free.length ? free.pop() : new SharedArrayBuffer(Math.max(bytes, BUFFER_BYTES));
  const view = Buffer.from(buffer);
  const bounds = new Int32Array(2 * documents);
  const wide = new Uint8Array(documents);
  let at = 0;
  let k = 0;
  for (const chunk of chunks) {
    for (const item of chunk) {
      const json = item.json;
      bounds[2 * k] = at;
      if (typeof json === "string") at += view.write(json, at, json.length, "latin1");
      else {
        at += json.copy(view, at);
        wide[k] = 1;
      }
      bounds[2 * k + 1] = at;
      k += 1;
    }
  }
  return { buffer, bounds, wide, sizes: chunks.map(chunk => chunk.length) };
}

/** A buffer of `packed` back for the next task, once its thread has answered. */
function release(buffer) {
  if (buffer.byteLength === BUFFER_BYTES && free.length < BUFFERS_KEPT) free.push(buffer);
}

/** The chunks of JSON texts `packed` copied (in a query thread). */
function unpacked({ buffer, bounds, wide, sizes }) {
  const view = Buffer.from(buffer);
  const chunks = [];
  let k = 0;
  for (const size of sizes) {
    const texts = new Array(size);
    for (let i = 0; i < size; i += 1, k += 1) {
      texts[i] = view.toString(wide[k] ? "utf8" : "latin1", bounds[2 * k], bounds[2 * k + 1]);
    }
    chunks.push(texts);
  }
  return chunks;
}

class Lane {
  constructor(name, nice) {
    this.name = name;
    this.nice = nice;
    this.worker = null;
    this.pending = new Map();
    this.next = 1;
  }

  start() {
    const worker = new Worker(__filename, {
      workerData: { role: ROLE, nice: this.nice },
      // what a thread allocates is a batch's documents at a time: a smaller young generation
      // than the main thread's default keeps its memory down, at no cost measured
      resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB }
    });
    worker.on("message", ({ id, result }) => {
      const waiting = this.pending.get(id);
      this.pending.delete(id);
      if (this.pending.size === 0) worker.unref();
      if (!waiting) return;
      if (result && result.failed) {
        waiting.reject(new Error(`the query thread failed: ${result.failed}`));
        return;
      }
      for (const key of ["rows", "result"]) {
        if (result[`${key}Json`] !== undefined) {
          result[key] = JSON.parse(result[`${key}Json`]);
          delete result[`${key}Json`];
        }
      }
      waiting.resolve(result);
    });
    worker.on("error", err => this.lost(worker, err));
    worker.on("exit", code => this.lost(worker, new Error(`the query thread exited (code ${code})`)));
    worker.unref(); // an idle thread does not keep the process alive (after `on`, which refs)
    this.worker = worker;
  }

  /** The thread is gone: its tasks fail, the next task starts another. */
  lost(worker, err) {
    if (this.worker !== worker) return;
    this.worker = null;
    const pending = this.pending;
    this.pending = new Map();
    for (const waiting of pending.values()) waiting.reject(err);
  }

  run(task) {
    const id = this.next;
    this.next += 1;
    const { chunks, ...rest } = task;
    const documents = packed(chunks);
    // the code this thread's engine generated for the task's queries goes with it: the query
    // thread never loads the engine's code generator (queryengine.js `prepare`)
    rest.codes = require("./queryengine").codeOf(task); // eslint-disable-line global-require
    if (this.pending.size === 0) this.worker.ref(); // a task under way keeps the process alive
    return new Promise((resolve, reject) => {
      this.pending.set(id, {
        resolve: result => {
          release(documents.buffer);
          resolve(result);
        },
        reject
      });
      this.worker.postMessage({ id, task: { ...rest, packed: documents } });
    });
  }

  stop() {
    const worker = this.worker;
    this.worker = null;
    if (worker) worker.terminate();
  }
}

const lanes = { first: new Lane("first", 0), background: new Lane("background", BACKGROUND_NICE) };

/** The engine's cost of a query, in microseconds a document (by its text), as last measured. */
const costs = new Map();
const COSTS_KEPT = 256;

function costOf(task) {
  return task.text !== undefined ? task.text : task.parts.map(part => part.text).join("\n");
}

function measured(key, us, documents) {
  if (documents === 0) return;
  costs.delete(key);
  costs.set(key, us / documents);
  if (costs.size > COSTS_KEPT) costs.delete(costs.keys().next().value);
}

/**
 * The documents the main thread parsed for the engine, kept for the next query that reads them
 * (a page of an app's list, read again and again): by stored document (a write replaces it, so
 * a version's object is never stale), the least recently read dropped past PARSED_CHARS of
 * their JSON. Only the engine reads them, for queries that call no UDF (user code might change
 * them).
 */
const parsed = new Map();
const PARSED_CHARS = 8 * 1024 * 1024;
let parsedChars = 0;

function parsedOf(item) {
  let doc = parsed.get(item);
  if (doc !== undefined) {
    parsed.delete(item);
    parsed.set(item, doc);
    return doc;
  }
  doc = JSON.parse(item.text());
  parsed.set(item, doc);
  parsedChars += item.json.length;
  while (parsedChars > PARSED_CHARS) {
    const [oldest] = parsed.keys();
    parsedChars -= oldest.json.length;
    parsed.delete(oldest);
  }
  return doc;
}

/** The task evaluated in this thread (its stored documents parsed here, or kept), measured. */
function here(task, key, documents) {
  const engine = inline || require("./queryengine"); // eslint-disable-line global-require
  const started = process.hrtime.bigint();
  const shared = !engine.callsUdf(task);
  const chunks = task.chunks.map(chunk => chunk.map(d => (shared ? parsedOf(d) : d.text())));
  const result = engine.evaluate({ ...task, chunks });
  if (!inline) measured(key, Number(process.hrtime.bigint() - started) / 1e3, documents);
  return Promise.resolve(result);
}

/**
 * The result of a task (queryengine.js `evaluate`, its `chunks` of stored documents: store.js
 * StoredDocument), from a query thread: the first lane's, or the background lane's when
 * `background`. A task the engine is known to do in less than INLINE_US (its query's cost a
 * document, as last measured, times its documents: a page of an app's list) is done in this
 * thread: handing it over would cost more than it (a round trip of a page of 100 small
 * documents cost about 0.5 ms of CPU in the two threads, the engine 0.2 ms here); so is a
 * task of a query not measured yet over INLINE_DOCUMENTS documents (INLINE_CHARS of JSON) or
 * fewer that calls no UDF (user code: it may take any time a document), which measures it.
 */
function run(task, background = false) {
  const key = costOf(task);
  let documents = 0;
  let chars = 0;
  for (const chunk of task.chunks) {
    documents += chunk.length;
    for (const item of chunk) chars += item.json.length;
  }
  const cost = costs.get(key);
  if (inline !== null || (!background && (cost !== undefined
    ? cost * documents <= INLINE_US
    : documents <= INLINE_DOCUMENTS && chars <= INLINE_CHARS &&
      !require("./queryengine").callsUdf(task)))) { // eslint-disable-line global-require
    return here(task, key, documents);
  }
  if (inline === null) {
    const lane = background ? lanes.background : lanes.first;
    if (lane.worker === null) {
      try {
        lane.start();
      } catch (err) {
        process.stderr.write(`cosmos local: no query thread (${err && err.message}): the engine runs in the ` +
          "main thread\n");
        inline = require("./queryengine"); // eslint-disable-line global-require
      }
    }
    if (inline === null) {
      return lane.run(task).then(result => {
        measured(key, result.us, documents);
        return result;
      });
    }
  }
  return here(task, key, documents);
}

/** Stop the query threads (the server closed). */
function stop() {
  for (const lane of Object.values(lanes)) lane.stop();
}

module.exports = { run, stop, BACKGROUND_DOCUMENTS };
