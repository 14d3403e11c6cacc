"""The canary of what the Cosmos DB endpoint uses of @vercel/cosmosdb-server and its query engine
beyond their public API (cosmos/internals.js): on the pinned versions every internal is where
it was; one that moved (a method gone, another version installed) stops the start with an
error that names it."""

from __future__ import annotations

import os
import subprocess

from funcstack._cache import node_executable, node_modules
from funcstack.cosmos._launcher import COSMOS_DIR

INTERNALS = (COSMOS_DIR / "internals.js").as_posix()
SQLPARSER = (COSMOS_DIR / "sqlparser.js").as_posix()


def node(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [node_executable(), "-e", script],
        env={**os.environ, "NODE_PATH": str(node_modules())},
        capture_output=True,
        text=True,
        timeout=60,
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
