"""The package's command line as docs/operating.md shows it, run against the local stack from a
shell that exported nothing (issue 92 item 6, M4): `.venv/bin/cosmos-outbox --settings
local.settings.json status` answers (it printed a traceback, "StoreUnavailableError: the store
is unreachable", until SSL_CERT_FILE and REQUESTS_CA_BUNDLE were exported: the stack's settings
file now names the authority funcstack gives the app's host); the global `--settings` reaches
`relay` too (it failed: "COSMOS_CONTAINER: Field required"); a script written for 0.4's HTTP mode
(COSMOS_OUTBOX_API, COSMOS_OUTBOX_KEY) is told so by name and shown the way now; and an endpoint
whose certificate is not trusted is one line naming the variables to set, never a traceback.
Each run as a person runs it: the installed `cosmos-outbox`, a process of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from funcstack import deadlines
from funcstack.services import free_port
from tools.stack import Stack

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
COMMAND = str(Path(sys.executable).with_name("cosmos-outbox"))
#: What a shell that exported nothing lacks: the trust funcstack gives its own processes, the
#: app's settings, the HTTP mode's variables.
UNSET = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "COSMOS_OUTBOX_API")


def a_fresh_shell(**extra: str) -> dict[str, str]:
    kept = {
        k: v
        for k, v in os.environ.items()
        if k not in UNSET and not k.startswith(("COSMOS", "Cosmos", "SERVICEBUS", "OUTBOX"))
    }
    return {**kept, **extra}


def cosmos_outbox(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [COMMAND, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=deadlines.SHORT,
        check=False,
        env=env,
    )


def test_the_documented_status_command_answers_from_a_fresh_shell(stack: Stack) -> None:
    done = cosmos_outbox("--settings", str(stack.settings_file), "status", env=a_fresh_shell())
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("pending "), done.stdout
    assert "Traceback" not in done.stderr


def test_an_endpoint_whose_certificate_is_not_trusted_is_one_line(
    stack: Stack, tmp_path: Path
) -> None:
    """The stack's settings without the authority named (a local.settings.json written before
    this change, or by hand): one line naming SSL_CERT_FILE and REQUESTS_CA_BUNDLE, exit 1."""
    assert stack.settings_file is not None
    document = json.loads(stack.settings_file.read_text())
    for name in UNSET:
        document["Values"].pop(name, None)
    settings = tmp_path / "local.settings.json"
    settings.write_text(json.dumps(document))
    done = cosmos_outbox(
        "--settings", str(settings), "--timeout", "20", "status", env=a_fresh_shell()
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, (
        done.stderr
    )
    assert "SSL_CERT_FILE" in done.stderr and "REQUESTS_CA_BUNDLE" in done.stderr, done.stderr


def test_the_global_settings_option_reaches_the_relay(stack: Stack) -> None:
    """`cosmos-outbox --settings FILE relay`: the relay reads the file (its /ready answers once
    its settings are read and its lease store reached), then stops on SIGTERM."""
    port = free_port()
    relay = subprocess.Popen(
        [COMMAND, "--settings", str(stack.settings_file), "relay", "--port", str(port)],
        cwd=ROOT,
        env=a_fresh_shell(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def ready() -> bool:
        if relay.poll() is not None:
            raise AssertionError(f"the relay ended: {relay.stderr.read() if relay.stderr else ''}")
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}/ready", timeout=deadlines.LOOPBACK
            ) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    try:
        deadlines.wait_for(
            ready, "the relay ready, its settings read from the file", deadlines.SHORT
        )
    finally:
        relay.send_signal(signal.SIGTERM)
        try:
            relay.wait(deadlines.SHORT)
        finally:
            if relay.poll() is None:
                relay.kill()
            if relay.stderr is not None:
                relay.stderr.close()


def test_a_script_of_the_http_mode_is_told_so_by_name() -> None:
    env = a_fresh_shell(COSMOS_OUTBOX_API="http://localhost:7071/api", COSMOS_OUTBOX_KEY="k")
    done = cosmos_outbox("status", env=env)
    assert done.returncode == 1 and done.stdout == ""
    assert "COSMOS_OUTBOX_API and COSMOS_OUTBOX_KEY are set" in done.stderr, done.stderr
    assert "--settings local.settings.json" in done.stderr and "Field required" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
