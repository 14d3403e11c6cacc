"""The operators' CLI as this repository runs it (`python -m tools.admin`: the package's
`cosmos-outbox`, with OUTBOX_API / OUTBOX_ADMIN_KEY and `--contact-id`) when what it talks to is
not the app: one line on stderr saying what happened, a non-zero exit, never a traceback; the
key read from the environment, never an argument; and its answer from the local app."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tools.stack import Stack, free_port

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def admin(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.admin", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


class Canned(BaseHTTPRequestHandler):
    """Answers every request with the server's canned status, content type and body."""

    def _answer(self) -> None:
        server = self.server
        assert isinstance(server, CannedServer)
        self.send_response(server.status)
        self.send_header("content-type", server.content_type)
        self.send_header("content-length", str(len(server.body)))
        self.end_headers()
        self.wfile.write(server.body)

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def do_DELETE(self) -> None:
        self._answer()

    def log_message(self, format: str, *args: object) -> None:
        return


class CannedServer(ThreadingHTTPServer):
    status = 200
    content_type = "text/html"
    body = b""


@pytest.fixture
def canned() -> Iterator[CannedServer]:
    server = CannedServer(("127.0.0.1", 0), Canned)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def url(server: CannedServer, scheme: str = "http") -> str:
    return f"{scheme}://127.0.0.1:{server.server_address[1]}/api"


def test_nothing_listening_is_connection_refused() -> None:
    line = one_line_error(admin("--api", f"http://127.0.0.1:{free_port()}/api", "status"))
    assert "connection refused" in line and "GET http://127.0.0.1:" in line


def test_a_gateways_html_error_page_is_not_the_apps_answer(canned: CannedServer) -> None:
    canned.status, canned.body = 502, b"<html><body><h1>502 Bad Gateway</h1></body></html>"
    line = one_line_error(admin("--api", url(canned), "quarantine", "list"))
    assert "502 Bad Gateway" in line and "an HTML page" in line


def test_a_success_that_is_not_json_is_not_the_apps_answer(canned: CannedServer) -> None:
    canned.status, canned.content_type, canned.body = 200, "text/plain", b"hello"
    line = one_line_error(admin("--api", url(canned), "status"))
    assert "not JSON (text/plain)" in line


@pytest.mark.parametrize(
    ("status", "key", "hint"),
    [
        (401, None, "set COSMOS_OUTBOX_KEY to the app's admin key"),
        (403, "not-the-master-key", "the key was refused"),
    ],
)
def test_unauthorised_says_what_key_to_send(
    canned: CannedServer, status: int, key: str | None, hint: str
) -> None:
    canned.status, canned.body = status, b""
    env = {k: v for k, v in os.environ.items() if "OUTBOX" not in k}
    if key:
        env["OUTBOX_ADMIN_KEY"] = key  # this repository's name of the package's variable
    line = one_line_error(
        admin("--api", url(canned), "redrive", "--since", "2026-11-22T08:00:00Z", env=env)
    )
    assert f"{status} " in line and hint in line
    assert "not-the-master-key" not in line  # the key is never printed


def test_the_key_is_never_an_argument(canned: CannedServer) -> None:
    done = admin("--api", url(canned), "--key", "a-key", "status")
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_tls_to_a_server_that_does_not_speak_it(canned: CannedServer) -> None:
    line = one_line_error(admin("--api", url(canned, "https"), "status"))
    assert "TLS" in line


def test_a_server_that_never_answers_times_out() -> None:
    """The timeout comes from the environment here (OUTBOX_ADMIN_TIMEOUT; --timeout too)."""
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)  # accepted by the kernel, never answered
        port = hung.getsockname()[1]
        done = admin(
            "--api",
            f"http://127.0.0.1:{port}/api",
            "status",
            env={**os.environ, "OUTBOX_ADMIN_TIMEOUT": "0.5"},
        )
    assert "no answer within 0.5 s" in one_line_error(done)


def test_an_api_that_is_not_a_url() -> None:
    line = one_line_error(admin("--api", "myapp.azurewebsites.net/api", "status"))
    assert "--api must be an http(s) URL" in line


def test_the_local_apps_answer_is_printed_as_json(stack: Stack) -> None:
    done = admin("--api", stack.api_url, "--timeout", "30", "status")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("pending ")
    as_json = admin("--api", stack.api_url, "--json", "status")
    assert {"pending", "quarantined", "leases"} <= set(json.loads(as_json.stdout))


def test_a_redrive_is_scoped_by_aggregate_type_and_id(stack: Stack) -> None:
    done = admin(
        "--api",
        stack.api_url,
        "--timeout",
        "30",
        "--json",
        "redrive",
        "--since",
        "2999-01-01T00:00:00Z",
        "--aggregate-type",
        "ticket",
        "--aggregate-id",
        "t-1",
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["events"], report["accepted"], report["quarantined"]) == (0, 0, 0)
    by_alias = admin(
        "--api",
        stack.api_url,
        "--json",
        "redrive",
        "--since",
        "2999-01-01T00:00:00Z",
        "--contact-id",
        "t-1",
    )
    assert by_alias.returncode == 0 and json.loads(by_alias.stdout)["events"] == 0
    refused = admin(
        "--api",
        stack.api_url,
        "--timeout",
        "30",
        "redrive",
        "--since",
        "2999-01-01T00:00:00Z",
        "--aggregate-id",
        "t-1",
    )
    assert refused.returncode == 1 and "aggregateId needs aggregateType" in refused.stderr
