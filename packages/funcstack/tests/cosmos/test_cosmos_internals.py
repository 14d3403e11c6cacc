"""The canary of what the Cosmos DB endpoint uses of @vercel/cosmosdb-server and its query engine
beyond their public API (cosmos/internals.js): on the pinned versions every internal is where
it was; one that moved (a method gone, another version installed) stops the start with an
error that names it."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from azure.cosmos import PartitionKey

from funcstack._cache import node_executable, node_modules
from funcstack.cosmos._launcher import COSMOS_DIR
from funcstack.deadlines import SHORT

INTERNALS = (COSMOS_DIR / "internals.js").as_posix()
SQLPARSER = (COSMOS_DIR / "sqlparser.js").as_posix()


def node(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [node_executable(), "-e", script, *args],
        env={**os.environ, "NODE_PATH": str(node_modules())},
        capture_output=True,
        text=True,
        timeout=SHORT,
        check=False,
    )


def test_every_internal_is_where_it_was_and_another_version_is_refused_naming_both() -> None:
    ran = node(
        f"const internals = require({INTERNALS!r}); internals.check();"
        "process.stdout.write('checked;');"
        "internals.checkVersion('@vercel/cosmosdb-server', '1.1.0');"
    )
    assert ran.stdout == "checked;", ran.stderr
    assert ran.returncode != 0
    assert "@vercel/cosmosdb-server 1.1.0 is installed; the endpoint is written for 1.0.1" in (
        ran.stderr
    )


def test_an_internal_that_moved_stops_the_start_naming_it() -> None:
    ran = node(
        f"const internals = require({INTERNALS!r});"
        "delete require('@vercel/cosmosdb-server/lib/account/items').default.prototype._getQuery;"
        "internals.check();"
    )
    assert ran.returncode != 0
    assert "cannot start on the installed packages" in ran.stderr
    assert "no _getQuery()" in ran.stderr


def test_a_syntax_tree_of_another_shape_is_refused_naming_the_node() -> None:
    """The engine's syntax tree as queryindex.js and sqlsemantics.js read it: here IN without
    its list."""
    ran = node(
        f"const internals = require({INTERNALS!r});"
        f"const engine = require(require({SQLPARSER!r}).ENGINE);"
        "const original = engine.default;"
        "const strip = n => { if (n && typeof n === 'object') {"
        " if (n.type === 'scalar_in_expression') delete n.list;"
        " Object.values(n).forEach(strip); } };"
        "engine.default = text => { const q = original(text); strip(q.ast); return q; };"
        "internals.check();"
    )
    assert ran.returncode != 0
    assert "scalar_in_expression" in ran.stderr


QUERYENGINE = (COSMOS_DIR / "queryengine.js").as_posix()

#: In a process of its own, as a query thread (queryworker.js): a query (argv[2]) evaluated with
#: the code another thread's engine generated for it (argv[3]), then spatial ones without.
#: Prints, as JSON, the rows of each and whether Babel (the engine's code generator) and Turf
#: were loaded after each: a module is loaded when require's cache holds it and not a stand-in
#: (a Proxy).
AS_A_QUERY_THREAD = """
const { types } = require("util");
const engine = require(process.argv[1]);
const [text, code] = process.argv.slice(2);
const loaded = part => Object.keys(require.cache).some(
  f => f.includes(part) && !types.isProxy(require.cache[f].exports));
const seen = () => ({ babel: loaded("/@babel/"), turf: loaded("/@turf/") });
const docs = [JSON.stringify({ n: 0, _rid: "a" }), JSON.stringify({ n: 2, _rid: "b" })];
const given = engine.evaluate({ kind: "whole", text, codes: { [text]: code },
  parameters: [{ name: "@n", value: 1 }], udfs: {}, chunks: [docs] });
const first = { rows: given.result, ...seen() };
const point = x => `{'type': 'Point', 'coordinates': [0, ${x}]}`;
const square = "{'type': 'Polygon', 'coordinates': [[[-1,-1], [1,-1], [1,1], [-1,1], [-1,-1]]]}";
const spatial = engine.evaluate({ kind: "whole", parameters: [], udfs: {}, chunks: [[docs[0]]],
  text: `SELECT VALUE [ROUND(ST_DISTANCE(${point(0)}, ${point(1)})), ` +
    `ST_WITHIN(${point(0.5)}, ${square}), ST_WITHIN(${point(2)}, ${square})] FROM c` });
console.log(JSON.stringify({ first, spatial: { rows: spatial.result, ...seen() } }));
"""


def test_a_query_thread_given_the_code_loads_no_code_generator_and_turf_only_when_called() -> None:
    """What a query thread's start costs: the engine's code generator (Babel, about 0.1 s of
    CPU to load) is not loaded by a thread given each query's code (the main thread's, which
    queryworker.js sends with the task), and Turf (about 0.04 s) only by a spatial function;
    what they answer is the same."""
    text = "SELECT c.n FROM c WHERE c.n >= @n"
    code = node(f"console.log(require({QUERYENGINE!r}).prepare({text!r}).query.code)")
    assert code.returncode == 0, code.stderr
    ran = node(AS_A_QUERY_THREAD, QUERYENGINE, text, code.stdout.strip())
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {
        "first": {"rows": [{"n": 2}], "babel": False, "turf": False},
        "spatial": {"rows": [[111195, True, False]], "babel": True, "turf": True},
    }


#: The start's check (internals.js), then the code the engine generates for each query the check
#: runs. Prints, as JSON, whether Babel was loaded after the check, and each query's code: the
#: one generated, the one the check gives it.
CHECK_THEN_GENERATE = """
const { types } = require("util");
const internals = require(process.argv[1]);
const loaded = part => Object.keys(require.cache).some(
  f => f.includes(part) && !types.isProxy(require.cache[f].exports));
internals.check();
const babel = loaded("/@babel/");
const engine = require(require(process.argv[2]).ENGINE).default;
const codes = Object.entries(internals.PROBE_CODE).map(
  ([text, code]) => ({ text, generated: engine(text).code, given: code }));
console.log(JSON.stringify({ babel, codes }));
"""


def test_the_start_loads_no_code_generator_and_gives_the_check_the_code_it_generates() -> None:
    """The check at start runs the engine on code given to it (PROBE_CODE: about 0.1 s of CPU
    less than loading Babel to generate it, which an endpoint running no query never does);
    that code is what the pinned engine generates for each of its queries."""
    ran = node(CHECK_THEN_GENERATE, INTERNALS, SQLPARSER)
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["babel"] is False
    assert len(out["codes"]) == 2
    for code in out["codes"]:
        assert code["generated"] == code["given"], code["text"]


QUERYWORKER = (COSMOS_DIR / "queryworker.js").as_posix()

#: queryworker.js's `run` of two queries not measured yet, one over 3 documents, then one over 40
#: (more than a chunk of the engine's). Prints, as JSON, their results and the threads the
#: process had more than before after each (Linux's /proc/self/status).
FIRST_QUERIES = """
const fs = require("fs");
const status = () => fs.readFileSync("/proc/self/status", "utf8");
const threads = () => Number(/Threads:\\s+(\\d+)/.exec(status())[1]);
const queryThreads = require(process.argv[1]);
const stored = n => Array.from({ length: n }, (_, i) => {
  const json = JSON.stringify({ id: String(i), n: i, _rid: `r${i}` });
  return { json, text: () => json };
});
const task = (text, n) => ({ kind: "whole", text, parameters: [], udfs: {}, chunks: [stored(n)] });
(async () => {
  const before = threads();
  const small = await queryThreads.run(task("SELECT VALUE COUNT(1) FROM c WHERE c.n >= 1", 3));
  const afterSmall = threads() - before;
  const large = await queryThreads.run(task("SELECT VALUE COUNT(1) FROM c WHERE c.n >= 2", 40));
  const afterLarge = threads() - before;
  queryThreads.stop();
  const threads_ = [afterSmall, afterLarge];
  console.log(JSON.stringify({ small: small.result, large: large.result, threads: threads_ }));
})();
"""


def test_a_first_query_over_a_few_documents_starts_no_query_thread() -> None:
    """A query not measured yet over a few documents (INLINE_DOCUMENTS) is evaluated in the main
    thread, which starts no query thread for it (about 0.07 s of CPU); one over more documents
    starts the first lane's thread. Both answer the same."""
    ran = node(FIRST_QUERIES, QUERYWORKER)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"small": [2], "large": [38], "threads": [0, 1]}


#: The code the main thread's engine generates for a query of each FROM (argv[2], argv[3]).
#: Prints, as JSON, after each, whether Babel's traverse was loaded and a run of the code.
TRAVERSE_AT_FIRST_USE = """
const { types } = require("util");
const engine = require(process.argv[1]);
const loaded = part => Object.keys(require.cache).some(
  f => f.includes(part) && !types.isProxy(require.cache[f].exports));
const docs = [JSON.stringify({ n: 1, tags: ["a", "b"], _rid: "a" })];
const out = process.argv.slice(2).map(text => {
  const rows = engine.evaluate({ kind: "whole", text, parameters: [], udfs: {}, chunks: [docs] });
  return { rows: rows.result, traverse: loaded("/@babel/traverse/") };
});
console.log(JSON.stringify(out));
"""


def test_babels_traverse_is_loaded_only_for_a_from_of_a_path() -> None:
    """The engine's code generator calls Babel's traverse (about 0.03 s of CPU to load) only
    for a FROM of a path: a query of another FROM does not load it; one of a path loads it and
    answers as before."""
    ran = node(
        TRAVERSE_AT_FIRST_USE,
        QUERYENGINE,
        "SELECT VALUE c.n FROM c",
        "SELECT VALUE t FROM c.tags t",
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == [
        {"rows": [1], "traverse": False},
        {"rows": [["a", "b"]], "traverse": True},
    ]


STORE = (COSMOS_DIR / "store.js").as_posix()

#: store.js's keyEpk of each key of argv[2] (a JSON list of [hash version, key]), twice in a row
#: each, in order. Prints, as JSON, the pairs of EPKs.
KEY_EPKS = """
const { keyEpk } = require(process.argv[1]);
const asked = JSON.parse(process.argv[2], (k, v) => (v === "-0" ? -0 : v));
const epk = (version, key) => keyEpk({ partitionKey: { paths: ["/pk"], version } }, [key]);
console.log(JSON.stringify(asked.map(([version, key]) => [epk(version, key), epk(version, key)])));
"""


def test_the_epks_kept_by_partition_key_are_the_sdks() -> None:
    """The EPK of a partition key is kept once computed (store.js keyEpk): asked again, and
    after other keys, it is still the one the SDK computes for it, for both hash versions; 0
    and -0 (one JSON, not one EPK) each keep their own."""
    keys: list[tuple[int, Any]] = [
        (version, key)
        for version in (2, 1)
        for key in ["a", 0, -0.0, 1.5, True, None, "a", -0.0, 0]
    ]
    asked = json.dumps([[v, "-0" if k == 0 and str(k).startswith("-") else k] for v, k in keys])
    ran = node(KEY_EPKS, STORE, asked)
    assert ran.returncode == 0, ran.stderr
    expected = [
        str(PartitionKey(path="/pk", version=v)._get_epk_range_for_partition_key(k).min)
        for v, k in keys
    ]
    assert json.loads(ran.stdout) == [[epk, epk] for epk in expected]


EPK = (COSMOS_DIR / "epk.js").as_posix()

#: epk.js's hash V1 EPK of each key of argv[2] (a JSON list of strings). Prints them as JSON.
V1_EPKS = """
const { effectivePartitionKeyV1 } = require(process.argv[1]);
console.log(JSON.stringify(JSON.parse(process.argv[2]).map(key => effectivePartitionKeyV1([key]))));
"""


def service_v1_cut(key: str) -> str:
    """The string the service hashes and encodes for a V1 key: its first 100 UTF-16 units
    (StringPartitionKeyComponent.Truncate, `value.Substring(0, 100)`, in
    Azure/azure-cosmos-dotnet-v3 Microsoft.Azure.Cosmos/src/direct/StringPartitionKeyComponent.cs,
    branch msdata/direct), UTF-8 encoded by Encoding.UTF8, which writes a lone surrogate as
    U+FFFD. The result has at most 100 code points, so azure-cosmos keeps it whole."""
    return key.encode("utf-16-le")[:200].decode("utf-16-le", errors="replace")


def test_hash_v1_cuts_a_string_at_100_utf16_units_as_the_service() -> None:
    """A V1 string key is cut at 100 UTF-16 units, as the service and the .NET SDK cut it, not
    at 100 code points (azure-cosmos 4.17): past a character outside the basic plane, the cut
    ends earlier, and a cut inside a surrogate pair hashes and encodes U+FFFD in its place. The
    expected EPK is azure-cosmos's of the string the service keeps (at most 100 code points)."""
    keys = [
        "😀" * 60,  # 120 units: 50 emoji kept, not 60
        "x" * 99 + "😀",  # the cut splits the pair: 99 "x" and U+FFFD
        "x" * 98 + "😀y",  # 101 units: the "y" is cut
        "x" * 99 + "😀😀",
        "x" * 100 + "😀",  # the same either way: 100 "x"
        "😀" * 50,
        "a" * 101,
    ]
    ran = node(V1_EPKS, EPK, json.dumps(keys))
    assert ran.returncode == 0, ran.stderr
    expected = [
        str(PartitionKey(path="/pk", version=1)._get_epk_range_for_partition_key(cut).min)
        for cut in map(service_v1_cut, keys)
    ]
    assert dict(zip(keys, json.loads(ran.stdout), strict=True)) == dict(
        zip(keys, expected, strict=True)
    )


#: queryengine.js's `prepare` of the read feed's query, then of each PREBUILT query with its
#: code generated. Prints, as JSON, whether Babel was loaded after the first, and each query's
#: code: the one generated, the one PREBUILT gives it.
PREBUILT_THEN_GENERATED = """
const { types } = require("util");
const engine = require(process.argv[1]);
const loaded = part => Object.keys(require.cache).some(
  f => f.includes(part) && !types.isProxy(require.cache[f].exports));
engine.prepare("SELECT * FROM c");
const babel = loaded("/@babel/");
const entries = [...engine.PREBUILT];
engine.PREBUILT.clear();
// a text of its own (a space after it, which the parser trims): the first is prepared already
const generated = text => engine.prepare(`${text} `).query.code;
const codes = entries.map(([text, code]) => ({ text, generated: generated(text), given: code }));
console.log(JSON.stringify({ babel, codes }));
"""


def test_the_read_feed_loads_no_code_generator_and_its_code_is_what_the_engine_generates() -> None:
    """The read feed's query (GET .../docs) and the lease stores' are given the code the engine
    generates for them (PREBUILT), so an endpoint whose only queries they are never loads Babel
    (about 0.07 s of CPU)."""
    ran = node(PREBUILT_THEN_GENERATED, QUERYENGINE)
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["babel"] is False
    assert [code["text"] for code in out["codes"]] == [
        "SELECT * FROM c",
        "SELECT c.id FROM c WHERE c.id = @p__id",
        "SELECT * FROM c WHERE STARTSWITH(c.id, @p__prefix)",
    ]
    for code in out["codes"]:
        assert code["generated"] == code["given"], code["text"]
