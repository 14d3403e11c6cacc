"""How funcstack starts Azurite: ready when its three services listen, and with
funcstack/node/azurite_preload.js run first, so that modules Azurite requires when it loads but a
start as funcstack's never uses (the Application Insights SDK, with telemetry off; the SQL blob
server and Sequelize, with no AZURITE_DB) or uses only for a request of a kind (axios: a copy from
a URL; jsonwebtoken: an OAuth token) are loaded at their first use instead. What the preload stands
on is Azurite's, pinned in funcstack's package.json (azurite ~3.37.0): the modules of its that
require each one when they load (REQUIRED_BY). The second test says when one moved; the preload's
entry for it is then harmless, and can go."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from funcstack._cache import node_executable, node_modules
from funcstack.deadlines import SHORT
from funcstack.services import _AZURITE_PRELOAD, port_in_use, start_azurite

pytestmark = pytest.mark.integration

#: Each module the preload stands in for (its request, resolved from Azurite's main script's
#: folder) and the module of Azurite's that requires it when it loads, relative to its package.
REQUIRED_BY = {
    "applicationinsights": Path("dist", "src", "common", "Telemetry.js"),
    "./blob/SqlBlobServer": Path("dist", "src", "blob", "BlobServerFactory.js"),
    "axios": Path("dist", "src", "blob", "handlers", "BlobHandler.js"),
    "jsonwebtoken": Path("dist", "src", "blob", "authentication", "BlobTokenAuthenticator.js"),
}

#: Prints, as JSON, for each module asked (`[request, requiring module]` pairs in argv[2]): whether
#: it was loaded once the module requiring it was, still after its `__esModule` was read, and
#: after its first use (its keys listed), and its `__esModule` as read then and once loaded. A
#: module is loaded when require's cache holds it and not a stand-in (a Proxy) in its place.
PROBE = """
const path = require("path");
const { types } = require("util");
const [main, asked] = [process.argv[1], JSON.parse(process.argv[2])];
const files = asked.map(([request]) => require.resolve(request, { paths: [path.dirname(main)] }));
const loaded = (file) => file in require.cache && !types.isProxy(require.cache[file].exports);
for (const [, requiring] of asked) require(requiring);
const out = {};
asked.forEach(([request], i) => {
  const before = loaded(files[i]);
  const esModule = require(files[i]).__esModule;
  const afterEsModule = loaded(files[i]);
  const used = Object.keys(require(files[i])).length > 0;
  out[request] = { before, afterEsModule, used, after: loaded(files[i]),
    esModule: esModule === true, realEsModule: require(files[i]).__esModule === true };
});
console.log(JSON.stringify(out));
"""


def _probe(*node_args: str) -> dict[str, dict[str, bool]]:
    azurite = node_modules() / "azurite"
    main = (azurite / "dist" / "src" / "azurite.js").resolve()
    asked = [[request, str(azurite / module)] for request, module in REQUIRED_BY.items()]
    done = subprocess.run(
        [node_executable(), *node_args, "-e", PROBE, str(main), json.dumps(asked)],
        cwd=main.parent,
        capture_output=True,
        text=True,
        timeout=SHORT,
        check=True,
    )
    result: dict[str, dict[str, bool]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_preload_stands_in_for_the_modules_named_here() -> None:
    """The preload's list (its LAZY, exported) and this test's are one: an entry added there
    is held by the tests below."""
    listed = subprocess.run(
        [
            node_executable(),
            "-e",
            f"console.log(JSON.stringify(require({json.dumps(str(_AZURITE_PRELOAD))}).LAZY))",
        ],
        capture_output=True,
        text=True,
        timeout=SHORT,
        check=True,
    )
    assert [entry["request"] for entry in json.loads(listed.stdout)] == list(REQUIRED_BY)


def test_with_the_preload_each_module_is_loaded_at_its_first_use_not_before() -> None:
    """Nothing is loaded when the module requiring it loads, nor when its `__esModule` is read
    (the stand-in answers the real module's); its first use loads it."""
    expected = {
        "before": False,
        "afterEsModule": False,
        "used": True,
        "after": True,
    }
    for request, seen in _probe("--require", str(_AZURITE_PRELOAD)).items():
        assert {k: seen[k] for k in expected} == expected, request
        assert seen["esModule"] == seen["realEsModule"], request


def test_without_it_azurite_loads_each_module_with_the_module_requiring_it() -> None:
    """The canary: if this fails for a module, Azurite no longer requires it when the module
    named in REQUIRED_BY loads (or that module moved), and the preload stands in for nothing
    there."""
    for request, seen in _probe().items():
        assert seen["before"], request


#: Node preload for the test below: every server after the first listens half a second late (a
#: loaded machine, made certain).
SLOW_LISTEN = """
const net = require("net");
const listen = net.Server.prototype.listen;
let servers = 0;
net.Server.prototype.listen = function (...args) {
  servers += 1;
  if (servers === 1) return listen.apply(this, args);
  setTimeout(() => listen.apply(this, args), 500);
  return this;
};
"""


def test_azurite_is_ready_when_all_three_services_listen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Azurite listens on blob, then queue, then table; start_azurite returns once all three
    do. It waited for blob only, and a queue client's first call could be refused and wait
    out the SDK's retries (a funcstack test took 20 s instead of 1 in make test). Here the
    queue and table services start half a second after blob."""
    slow = tmp_path / "slow_listen.js"
    slow.write_text(SLOW_LISTEN)
    monkeypatch.setenv("NODE_OPTIONS", f'--require "{slow}"')
    azurite = start_azurite(tmp_path / "data", tmp_path / "log")
    try:
        assert [port_in_use(port) for port in azurite.ports] == [True, True, True]
    finally:
        azurite.stop()
