"""funcstack's services for a suite on another Python (``funcstack.external``): the module,
loaded by path into Python 3.11 (this interpreter when there is none) as a suite on that
version copies it, runs this environment's ``funcstack up --json`` and yields connection
strings whose ports listen; the services stop when it exits, and a missing command is named.

The ports are asked whether they listen with a bind, not a connection: each endpoint starts at
its first connection (``funcstack._activation``, held by its own tests), so a connection here
would start three stand-ins to prove what the release check proves already: the core's suite
runs on Python 3.11 through a copy of this module, its SDKs reaching each service
(``make release-check``; tools/release)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import funcstack.external
from funcstack.deadlines import LONG
from funcstack.external import ExternalStackError, external_services

pytestmark = pytest.mark.integration

MODULE = Path(funcstack.external.__file__)
FUNCSTACK = Path(sys.executable).with_name("funcstack")
#: Run by the other interpreter: start the services, check that each one's port listens, stop,
#: and check that none does any more.
SCRIPT = """
import importlib.util, socket, sys, urllib.parse
spec = importlib.util.spec_from_file_location("funcstack_external", sys.argv[1])
module = importlib.util.module_from_spec(spec)
sys.modules["funcstack_external"] = module
spec.loader.exec_module(module)

def ports(services):
    cosmos = services.cosmos_connection_string.split("AccountEndpoint=")[1].split(";")[0]
    bus = services.servicebus_connection_string.split("Endpoint=")[1].split(";")[0]
    blob = dict(p.split("=", 1) for p in services.storage_connection_string.split(";") if p)
    return [urllib.parse.urlsplit(u).port for u in (cosmos, bus, blob["BlobEndpoint"])]

def listening(port):  # a bind refused: funcstack._activation.listened_on, not importable here
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False

with module.external_services(config=sys.argv[2]) as services:
    found = ports(services)
    assert all(listening(p) for p in found), found
    print("python", sys.version_info[0], sys.version_info[1], "ports", *found)
assert not any(listening(p) for p in found), found
print("stopped")
"""


def _other_python() -> str:
    return shutil.which("python3.11") or next(
        (
            str(p)
            for p in sorted(
                Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")).glob(
                    "versions/3.11.*/bin/python3.11"
                )
            )
        ),
        sys.executable,
    )


def test_a_suite_on_another_python_gets_the_services_and_they_stop_after(tmp_path: Path) -> None:
    python = _other_python()
    config = tmp_path / "funcstack.json"
    config.write_text("{}")  # no resources: nothing connects, so no endpoint starts
    run = subprocess.run(
        [python, "-c", SCRIPT, str(MODULE), str(config)],
        env={**os.environ, "FUNCSTACK": str(FUNCSTACK)},
        capture_output=True,
        text=True,
        timeout=LONG,  # a suite run in a subprocess
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ports" in run.stdout and run.stdout.rstrip().endswith("stopped"), run.stdout


def test_a_missing_command_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FUNCSTACK", raising=False)
    with pytest.raises(ExternalStackError, match="FUNCSTACK is not set"), external_services():
        pass
    with (
        pytest.raises(ExternalStackError, match="cannot run '/no/such/funcstack'"),
        external_services("/no/such/funcstack"),
    ):
        pass


def test_a_refusal_is_reported_with_funcstacks_words(tmp_path: Path) -> None:
    bad = tmp_path / "funcstack.json"
    bad.write_text("{not json")
    with (
        pytest.raises(ExternalStackError, match="did not come up") as raised,
        external_services(str(FUNCSTACK), config=bad),
    ):
        pass
    assert "funcstack.json" in str(raised.value)
