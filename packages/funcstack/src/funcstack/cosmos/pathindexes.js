"use strict";
/*
 * Range indexes on document paths for the local Cosmos DB endpoint's queries (query.js), as a
 * container's indexing policy declares them ("Indexing policies in Azure Cosmos DB",
 * learn.microsoft.com):
 *
 *   - a path is indexed when the most precise of the policy's included and excluded paths that
 *     matches it is an included one (`/*` everything, `/a/*` a and below, `/a/?` the value at
 *     a, `/tags/[]/?` the elements of the array at tags); `id` and `_ts` are always indexed when
 *     the mode is consistent; mode "none" (or automatic false) indexes nothing;
 *   - a composite index (the policy's compositeIndexes) serves an ORDER BY of several paths in
 *     its order or exactly reversed;
 *   - an index holds (value, _rid) for every document, the value at the path (undefined where
 *     there is none, so an ORDER BY can put those first and NOT IS_DEFINED is a range too);
 *     an element index holds (element, _rid) for each element of the array at the path
 *     (ARRAY_CONTAINS); the primary index holds every _rid in order (a scan that can resume).
 *
 * The service indexes every included path when a document is written. Here an index is built
 * when a query first needs it (the service would have had it all along), in slices of
 * SLICE_MS between requests, so the endpoint keeps answering; the query that asked waits for
 * it (queryrun.js answers an empty page with a continuation if that takes longer than its
 * budget). A build walks the documents in _rid order (the primary index, sorted once per
 * container) and puts each one's _rid in the bucket of its value, so only the distinct values
 * are sorted; each document gives its value from its JSON text (rawValueAt: the store keeps
 * documents as text), parsed only where that cannot tell. From then on store.js reports every version written or removed and each index
 * of the container is changed in step (the previous version's entries out, the new one's in),
 * so a query costs what it reads from the index, not what the container holds. A change of
 * the policy (a container replace) drops the indexes it no longer declares; a restart builds
 * them again when first needed (nothing of them is kept on disk).
 */

const { SortedKeys, sortInSlices, MIN_RID, MAX_RID, below, above } = require("./sortedkeys");

/** An index is built in slices of about this long between other requests. */
const SLICE_MS = 2;
/** Documents handled between two looks at the clock while building. */
const BUILD_CHUNK = 64;
/** The primary index's key: every entry has it, so its entries are in _rid order. */
const NO_KEY = null;

/** The value at `segments` of a document (undefined when there is none). */
function valueAt(doc, segments) {
  let cur = doc;
  for (const seg of segments) {
    if (cur === null || typeof cur !== "object") return undefined;
    cur = cur[seg];
  }
  return cur;
}

/** `rawValueAt` could not tell the value from the text alone: the document is to be parsed. */
const UNKNOWN = Symbol("parse the document");

/**
 * The value at `segments` in a document's JSON text (as the store keeps it: store.js
 * StoredDocument), reading only what leads to it: keys are compared, the
 * values on the way skipped, the one found parsed alone. UNKNOWN where the text is not what
 * JSON.stringify writes, or where the engine's member access could see something else (a
 * name on an array, a position in an object): the caller parses the document then.
 */
function rawValueAt(text, segments) {
  const n = text.length;
  let i = 0;
  const space = () => {
    for (; i < n; i += 1) {
      const c = text.charCodeAt(i);
      if (c !== 32 && c !== 9 && c !== 10 && c !== 13) return;
    }
  };
  const skipString = () => { // at '"': to the next quote not escaped
    let from = i + 1;
    for (;;) {
      const q = text.indexOf('"', from);
      if (q < 0) {
        i = n;
        return;
      }
      let slashes = 0;
      for (let b = q - 1; b > i && text.charCodeAt(b) === 92; b -= 1) slashes += 1;
      if (slashes % 2 === 0) {
        i = q + 1;
        return;
      }
      from = q + 1;
    }
  };
  const skipValue = () => {
    space();
    const c = text.charCodeAt(i);
    if (c === 34) {
      skipString();
      return;
    }
    if (c === 123 || c === 91) {
      let depth = 0;
      while (i < n) {
        const d = text.charCodeAt(i);
        if (d === 34) {
          skipString();
          continue;
        }
        if (d === 123 || d === 91) depth += 1;
        else if (d === 125 || d === 93) {
          depth -= 1;
          if (depth === 0) {
            i += 1;
            return;
          }
        }
        i += 1;
      }
      return;
    }
    for (; i < n; i += 1) {
      const d = text.charCodeAt(i);
      if (d === 44 || d === 125 || d === 93 || d === 32 || d === 9 || d === 10 || d === 13) return;
    }
  };
  for (const seg of segments) {
    space();
    const c = text.charCodeAt(i);
    if (typeof seg === "number") {
      if (c === 123) return UNKNOWN; // a position in an object: its key "0"
      if (c !== 91) return undefined;
      i += 1;
      space();
      if (text.charCodeAt(i) === 93) return undefined;
      for (let k = 0; k < seg; k += 1) {
        skipValue();
        space();
        if (text.charCodeAt(i) !== 44) return undefined; // fewer elements
        i += 1;
      }
      continue;
    }
    if (c === 91) return UNKNOWN; // a name on an array (length, ...)
    if (c !== 123) return undefined;
    i += 1;
    for (;;) {
      space();
      const k = text.charCodeAt(i);
      if (k === 125) return undefined; // no such key
      if (k !== 34) return UNKNOWN;
      const start = i;
      skipString();
      let key = text.slice(start + 1, i - 1);
      if (key.includes("\\")) key = JSON.parse(text.slice(start, i));
      space();
      if (text.charCodeAt(i) !== 58) return UNKNOWN;
      i += 1;
      if (key === seg) break;
      skipValue();
      space();
      const next = text.charCodeAt(i);
      if (next === 44) i += 1;
      else if (next === 125) return undefined;
      else return UNKNOWN;
    }
  }
  space();
  const start = i;
  skipValue();
  try {
    return JSON.parse(text.slice(start, i));
  } catch (err) {
    return UNKNOWN;
  }
}

/** "/a/b" for the segments ["a", "b"] (a name other than [A-Za-z0-9_] quoted, as policies do). */
function pathText(segments) {
  return segments.map(s => (typeof s === "number" || /^[A-Za-z_][A-Za-z0-9_]*$/.test(s) ? `/${s}` : `/"${s}"`))
    .join("") || "/";
}

/** A policy path (`/a/"b c"/[]/?`) as [segments, terminal]: terminal "?", "*" or null. */
function parsePolicyPath(text) {
  const raw = String(text || "");
  const segs = [];
  let i = 0;
  let terminal = null;
  while (i < raw.length) {
    if (raw[i] !== "/") return null;
    i += 1;
    let seg;
    if (raw[i] === '"') {
      const end = raw.indexOf('"', i + 1);
      if (end < 0) return null;
      seg = raw.slice(i + 1, end);
      i = end + 1;
    } else {
      const end = raw.indexOf("/", i);
      seg = raw.slice(i, end < 0 ? raw.length : end);
      i = end < 0 ? raw.length : end;
      if (seg === "?" || seg === "*") {
        terminal = seg;
        if (i !== raw.length) return null;
        break;
      }
    }
    segs.push(seg);
  }
  return [segs, terminal];
}

/**
 * Whether a pattern's segments match the start of a document path: `[]` matches an array
 * position (a number), any other segment itself.
 */
function prefixMatches(pattern, segments) {
  if (pattern.length > segments.length) return false;
  for (let i = 0; i < pattern.length; i += 1) {
    const p = pattern[i];
    const s = segments[i];
    if (p === "[]" ? typeof s !== "number" : String(s) !== p) return false;
  }
  return true;
}

/**
 * What a container's indexing policy indexes: `indexes(segments)` for the value at a path,
 * `composite(orders)` for an ORDER BY of several paths, and the declared composite indexes.
 */
class Policy {
  constructor(policy) {
    const p = policy || {};
    this.text = JSON.stringify(p);
    const mode = String(p.indexingMode || "consistent").toLowerCase();
    this.on = mode !== "none" && p.automatic !== false;
    this.rules = [];
    for (const [list, included] of [[p.includedPaths, true], [p.excludedPaths, false]]) {
      for (const entry of Array.isArray(list) ? list : []) {
        const parsed = parsePolicyPath(entry && entry.path);
        if (parsed) this.rules.push({ segs: parsed[0], terminal: parsed[1], included, path: entry.path });
      }
    }
    this.composites = (Array.isArray(p.compositeIndexes) ? p.compositeIndexes : [])
      .filter(c => Array.isArray(c) && c.length > 1)
      .map(c => c.map(e => ({
        segs: (parsePolicyPath(`${e.path}/?`) || [[]])[0],
        path: e.path,
        desc: String(e.order || "ascending").toLowerCase() === "descending"
      })));
  }

  /** The most precise rule matching the value at `segments`, or null. */
  rule(segments) {
    let best = null;
    for (const r of this.rules) {
      const matches = r.terminal === "?"
        ? r.segs.length === segments.length && prefixMatches(r.segs, segments)
        : prefixMatches(r.segs, segments); // "*" (and a bare prefix): the path and below
      if (!matches) continue;
      if (best === null || r.segs.length > best.segs.length ||
        (r.segs.length === best.segs.length && r.terminal === "?" && best.terminal !== "?") ||
        (r.segs.length === best.segs.length && r.terminal === best.terminal && !r.included)) best = r;
    }
    return best;
  }

  /** Whether the value at `segments` has a range index. */
  indexes(segments) {
    if (!this.on) return false;
    if (segments.length === 1 && (segments[0] === "id" || segments[0] === "_ts")) return true;
    const r = this.rule(segments);
    return r !== null && r.included;
  }

  /** Whether the elements of the array at `segments` are indexed (`/tags/[]/?`, `/tags/*`). */
  indexesElements(segments) {
    return this.indexes([...segments, 0]);
  }

  /**
   * The composite index serving an ORDER BY of `orders` ([{segs, desc}], two or more): [index,
   * reversed], or null when none does (the service then refuses the query).
   */
  composite(orders) {
    if (!this.on) return null;
    for (const c of this.composites) {
      if (c.length !== orders.length) continue;
      const same = c.every((e, i) => pathText(e.segs) === pathText(orders[i].segs));
      if (!same) continue;
      if (c.every((e, i) => e.desc === orders[i].desc)) return [c, false];
      if (c.every((e, i) => e.desc !== orders[i].desc)) return [c, true];
    }
    return null;
  }
}

/**
 * One range index of a container: entries (key, _rid) for every document, in `SortedKeys`.
 * `extract(get)` gives a document's keys (one, none, or several for an element index) from
 * `get(segments)`, the value at a path of it.
 */
class PathIndex {
  constructor(name, extract, directions = null) {
    this.name = name;
    this.extract = extract;
    this.keys = new SortedKeys(directions);
    this.ready = false;
    this.building = null; // the promise of the build under way
    this.pending = null; // while it is built: the versions written and removed meanwhile
  }

  keysOf(doc) {
    return this.extract(segs => valueAt(doc, segs));
  }

  enter(doc) {
    if (this.pending) this.pending.push([true, doc]);
    else for (const key of this.keysOf(doc)) this.keys.add(key, doc._rid);
  }

  leave(doc) {
    if (this.pending) this.pending.push([false, doc]);
    else for (const key of this.keysOf(doc)) this.keys.delete(key, doc._rid);
  }

  /**
   * The keys of an item of the package's documents: a stored document's are read from its
   * JSON text where that tells the value (rawValueAt), else it is parsed.
   */
  keysOfItem(item) {
    if (typeof item.text === "function") {
      const text = item.text();
      let unknown = false;
      const keys = this.extract(segs => {
        const v = rawValueAt(text, segs);
        if (v === UNKNOWN) unknown = true;
        return v;
      });
      if (!unknown) return keys;
    }
    const doc = item.read();
    return doc ? this.keysOf(doc) : [];
  }
}

const single = segments => get => [get(segments)];

function elements(segments) {
  return get => {
    const v = get(segments);
    return Array.isArray(v) ? v : [];
  };
}

/** A composite key: the values at each path (the index's directions order them). */
const tuple = paths => get => [paths.map(segs => get(segs))];

/** The path indexes of one container (the package's collection object). */
class ContainerPathIndexes {
  constructor(collection) {
    this.collection = collection;
    this.policy = new Policy((collection.read() || {}).indexingPolicy);
    this.byName = new Map();
  }

  /** The policy now; the indexes it no longer declares are dropped. */
  currentPolicy() {
    const text = JSON.stringify(((this.collection.read() || {}).indexingPolicy) || {});
    if (text !== this.policy.text) {
      this.policy = new Policy(JSON.parse(text));
      for (const name of [...this.byName.keys()]) if (name !== "primary") this.byName.delete(name);
    }
    return this.policy;
  }

  index(name, make) {
    let index = this.byName.get(name);
    if (!index) {
      index = make();
      this.byName.set(name, index);
    }
    return index;
  }

  /** Every _rid, in order (the order a query without ORDER BY answers in). */
  primary() {
    return this.index("primary", () => new PathIndex("primary", () => [NO_KEY]));
  }

  /** The range index of the value at `segments` (only for an indexed path). */
  path(segments) {
    return this.index(`v${JSON.stringify(segments)}`, () => new PathIndex(pathText(segments), single(segments)));
  }

  /** The index of the elements of the array at `segments`. */
  elements(segments) {
    return this.index(`e${JSON.stringify(segments)}`,
      () => new PathIndex(`${pathText(segments)}/[]`, elements(segments)));
  }

  /** The composite index of the policy's `declared` ([{segs, desc}]). */
  composite(declared) {
    const name = `c${JSON.stringify(declared.map(e => [e.segs, e.desc]))}`;
    return this.index(name, () => new PathIndex(
      declared.map(e => `${pathText(e.segs)} ${e.desc ? "DESC" : "ASC"}`).join(", "),
      tuple(declared.map(e => e.segs)), declared.map(e => (e.desc ? -1 : 1))));
  }

  /** A version of a document was written over `previous` (null for none). */
  written(doc, previous) {
    for (const index of this.byName.values()) {
      if (previous) index.leave(previous);
      index.enter(doc);
    }
  }

  /** A document was removed. */
  removed(doc) {
    for (const index of this.byName.values()) index.leave(doc);
  }

  /**
   * Resolves once `index` holds every document. Built in three steps, each cut into slices of
   * SLICE_MS that yield to other requests between them: every document's entries are
   * collected (a live walk of the documents), sorted (sortedkeys.js sortInSlices) and loaded;
   * the versions written or removed meanwhile are kept aside (`pending`) and applied at the
   * end, each in its turn (adding an entry twice, or removing one not there, changes nothing).
   */
  ready(index) {
    if (index.ready) return Promise.resolve(index);
    if (index.building) return index.building;
    index.pending = [];
    index.building = this.build(index).then(() => {
      const pending = index.pending;
      index.pending = null;
      for (const [entered, doc] of pending) {
        if (entered) index.enter(doc);
        else index.leave(doc);
      }
      index.ready = true;
      index.building = null;
      return index;
    }, err => {
      index.pending = null;
      index.building = null;
      throw err;
    });
    return index.building;
  }

  async build(index) {
    let slice = process.hrtime.bigint();
    const tick = async () => {
      if (process.hrtime.bigint() - slice < BigInt(SLICE_MS * 1e6)) return;
      await new Promise(resolve => setImmediate(resolve));
      if (this.byName.get(nameOf(this, index)) !== index) {
        throw new Error("the container's indexing policy changed while an index was built");
      }
      slice = process.hrtime.bigint();
    };
    if (index === this.byName.get("primary")) {
      await this.buildPrimary(index, tick);
      return;
    }
    // the documents in _rid order (the primary index, built once per container), each value's
    // _rids so in order already: entries of one value (a "bucket") need no sorting, only the
    // values do (few, or cheap to compare); arrays, objects and composite keys sort whole
    const primary = await this.ready(this.primary());
    const data = this.collection.documents._data;
    const buckets = new Map();
    const otherKeys = [];
    const otherRids = [];
    let at = [NO_KEY, MIN_RID];
    let after = false;
    for (;;) {
      const got = primary.keys.takeRids(at[0], at[1], after, BUILD_CHUNK);
      if (got === null) break;
      for (const rid of got[0]) {
        const item = data.get(rid);
        if (!item) continue;
        for (const key of index.keysOfItem(item)) {
          if (key !== null && typeof key === "object") {
            otherKeys.push(key);
            otherRids.push(rid);
            continue;
          }
          const bucket = buckets.get(key);
          if (bucket === undefined) buckets.set(key, [rid]);
          else bucket.push(rid);
        }
      }
      at = [got[1], got[2]];
      after = true;
      await tick();
    }
    const compare = index.keys.compareKey;
    const values = [...buckets.keys()];
    const valueOrder = await sortInSlices(values.length, (i, j) => compare(values[i], values[j]), tick);
    const keys = [];
    const rids = [];
    for (let v = 0; v < valueOrder.length; v += 1) {
      const value = values[valueOrder[v]];
      for (const rid of buckets.get(value)) {
        keys.push(value);
        rids.push(rid);
      }
      if ((v & 255) === 255) await tick();
    }
    const otherOrder = await sortInSlices(otherKeys.length, (i, j) => {
      const c = compare(otherKeys[i], otherKeys[j]);
      return c !== 0 ? c : compareRid(otherRids[i], otherRids[j]);
    }, tick);
    for (const i of otherOrder) { // arrays and objects sort after every other value
      keys.push(otherKeys[i]);
      rids.push(otherRids[i]);
    }
    await index.keys.load(keys, rids, identity(keys.length), tick);
  }

  /** The primary index: every _rid, sorted (the order the path indexes are collected in). */
  async buildPrimary(index, tick) {
    const rids = [];
    let n = 0;
    for (const rid of this.collection.documents._data.keys()) { // a live walk
      rids.push(rid);
      n += 1;
      if ((n & 1023) === 0) await tick();
    }
    const order = await sortInSlices(rids.length, (i, j) => compareRid(rids[i], rids[j]), tick);
    await index.keys.load(rids.map(() => NO_KEY), rids, order, tick);
  }
}

const compareRid = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

function identity(n) {
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i += 1) order[i] = i;
  return order;
}

function nameOf(indexes, index) {
  for (const [name, i] of indexes.byName) if (i === index) return name;
  return null;
}

const byCollection = new WeakMap();

/** The path indexes of a container (the package's collection object). */
function pathIndexes(collection) {
  let found = byCollection.get(collection);
  if (!found) {
    found = new ContainerPathIndexes(collection);
    byCollection.set(collection, found);
  }
  return found;
}

/** The path indexes of a container if any were made, else null (writes skip the others). */
function existingPathIndexes(collection) {
  return byCollection.get(collection) || null;
}

module.exports = {
  pathIndexes,
  rawValueAt,
  UNKNOWN,
  existingPathIndexes,
  Policy,
  valueAt,
  pathText,
  parsePolicyPath,
  MIN_RID,
  MAX_RID,
  below,
  above,
  SLICE_MS
};
