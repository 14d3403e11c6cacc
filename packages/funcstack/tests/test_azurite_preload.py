"""How funcstack starts Azurite: ready when its three services listen, and with
funcstack/node/azurite_preload.js run first, so that the Application Insights SDK that Azurite's
telemetry module requires when it loads is loaded at its first use instead (funcstack starts
Azurite with telemetry off, so never). What the preload stands on is Azurite's, pinned in
funcstack's package.json (azurite ~3.37.0): its telemetry module, Telemetry.js in its
dist/src/common folder, which requires "applicationinsights" at load. The second test says
when that moved; the preload is then harmless, and can go."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from funcstack._cache import node_executable, node_modules
from funcstack.services import _AZURITE_PRELOAD, port_in_use, start_azurite

pytestmark = pytest.mark.integration

#: Azurite's telemetry module, relative to its package.
TELEMETRY = Path("dist", "src", "common", "Telemetry.js")

#: Prints, as JSON: whether the SDK's files were loaded after Azurite's telemetry module loaded,
#: and again after its first use (`appInsights.TelemetryClient`), and what that use gave.
PROBE = """
const telemetry = require(process.argv[1]);
// The SDK's main file is where the stand-in sits too: loaded means its other files are.
const sdkLoaded = () => Object.keys(require.cache).filter(
  (f) => f.includes("/node_modules/applicationinsights/")).length > 1;
const before = sdkLoaded();
const client = telemetry.AzuriteTelemetryClient.appInsights.TelemetryClient;
console.log(JSON.stringify({ before, after: sdkLoaded(), client: typeof client }));
"""


def _probe(*node_args: str) -> dict[str, object]:
    azurite = node_modules() / "azurite"
    main = (azurite / "dist" / "src" / "azurite.js").resolve()
    done = subprocess.run(
        [node_executable(), *node_args, "-e", PROBE, str(azurite / TELEMETRY)],
        cwd=main.parent,  # the preload resolves the SDK from Azurite's main script's folder
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_with_the_preload_the_sdk_is_loaded_at_its_first_use_not_before() -> None:
    assert _probe("--require", str(_AZURITE_PRELOAD)) == {
        "before": False,
        "after": True,
        "client": "function",
    }


def test_without_it_azurite_loads_the_sdk_with_its_telemetry_module() -> None:
    """The canary: if this fails, Azurite no longer requires the SDK when its telemetry module
    loads (or that module moved), and the preload stands in for nothing."""
    assert _probe() == {"before": True, "after": True, "client": "function"}


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
