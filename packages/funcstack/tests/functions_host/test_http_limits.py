"""What the host answers before (and around) the app, as the Azure host does: Kestrel's limits
(414, 431, bodyless 400), its header and body timeouts (408), CORS as `func start` applies it
from local.settings.json `Host`, route matching on the path as Kestrel hands it over (`%2F`
kept, empty segments kept), and logs without tracebacks or warnings for any of it."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from funcstack.deadlines import SHORT
from funcstack.functions_host._http_server import (
    BODY_GRACE_SETTING,
    HEADERS_TIMEOUT_SETTING,
    KestrelLimits,
)
from funcstack.functions_host._launcher import RunnerStartError, RunningRunner, start_runner
from funcstack.functions_host._worker import AUTH_LEVEL_ADVICE
from funcstack.functions_host.testing import call

from .conftest import make_app_dir

pytestmark = pytest.mark.integration

LIMITS = KestrelLimits()
ORIGIN = "http://app.example"
OTHER_ORIGIN = "http://other.example"


def start(tmp: Path, sample: str, host: dict[str, Any] | None = None) -> RunningRunner:
    tmp.mkdir(parents=True, exist_ok=True)
    app_dir = make_app_dir(
        tmp,
        sample,
        {
            "FUNCTIONS_WORKER_RUNTIME": "python",
            "SAMPLE_ROUTE": "by-setting",
            # local-only settings: short timeouts so that a test does not wait 30 s
            HEADERS_TIMEOUT_SETTING: "0.5",
            BODY_GRACE_SETTING: "0.5",
        },
    )
    settings = app_dir / "local.settings.json"
    if host is not None:
        data = json.loads(settings.read_text())
        settings.write_text(json.dumps({**data, "Host": host}))
    return start_runner(app_dir=app_dir, settings_file=settings, log_path=tmp / "runner.log")


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRunner]:
    runner = start(
        tmp_path_factory.mktemp("limits"),
        "sample_http_app.py",
        {"CORS": f"{ORIGIN},https://second.example", "CORSCredentials": True},
    )
    try:
        yield runner
    finally:
        runner.stop()


def exchange(
    runner: RunningRunner, data: bytes, *, then: bytes = b""
) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes; read the answer until the server closes (a read's deadline SHORT)."""
    with socket.create_connection(("127.0.0.1", runner.port), timeout=SHORT) as sock:
        sock.sendall(data)
        if then:
            sock.sendall(then)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def get(path: str, extra: bytes = b"") -> bytes:
    return (
        b"GET " + path.encode() + b" HTTP/1.1\r\nHost: h\r\n" + extra + b"Connection: close\r\n\r\n"
    )


def refused(runner: RunningRunner, data: bytes, status: int, **kw: bytes) -> None:
    got, headers, body = exchange(runner, data, **kw)
    assert got == status
    assert body == b""  # no echo of the request, no text
    assert headers.get("content-length", "0") == "0"
    assert headers.get("connection") == "close"


# -- Kestrel's limits ---------------------------------------------------------------------------


def test_a_url_over_8_kb_is_414_without_a_body(host: RunningRunner) -> None:
    refused(host, get("/api/items/" + "a" * LIMITS.max_request_line), 414)


def test_a_request_line_over_8192_bytes_is_414_even_when_the_url_alone_fits(
    host: RunningRunner,
) -> None:
    # "GET " + url + " HTTP/1.1\r\n": 15 bytes around the URL
    fits = "/api/items/" + "a" * (LIMITS.max_request_line - 15 - len("/api/items/"))
    assert exchange(host, get(fits))[0] == 200
    refused(host, get(fits + "a"), 414)


def test_headers_over_32_kb_in_all_or_over_100_are_431_without_a_body(
    host: RunningRunner,
) -> None:
    big = b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 500) for i in range(70))  # ~36 KB in all
    refused(host, get("/api/items", big), 431)
    one_huge = b"X-Huge: " + b"v" * (LIMITS.max_headers_total + 10) + b"\r\n"
    refused(host, get("/api/items", one_huge), 431)
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(LIMITS.max_header_count + 1))
    refused(host, get("/api/items", many), 431)
    allowed = b"".join(b"X-H%d: v\r\n" % i for i in range(LIMITS.max_header_count - 3))
    assert exchange(host, get("/api/items", allowed))[0] == 200


def test_a_malformed_request_is_a_bodyless_400(host: RunningRunner) -> None:
    refused(host, get("/api/items", b"No colon here\r\n"), 400)


def test_a_request_head_that_never_completes_gets_408(host: RunningRunner) -> None:
    refused(host, b"GET /api/items HTTP/1.1\r\nHost: h\r\n", 408)


def test_a_body_that_never_completes_gets_408_and_the_function_is_not_called(
    host: RunningRunner,
) -> None:
    head = (
        b"POST /api/items HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n"
    )
    refused(host, head, 408, then=b'{"a": ')
    assert host.log_path is not None
    assert "function=create_item status=408" in host.log_path.read_text()


def test_refused_requests_leave_one_short_line_and_no_traceback(host: RunningRunner) -> None:
    refused(host, get("/api/items/" + "b" * 10_000), 414)
    refused(host, get("/api/items", b"Bad Header\r\n"), 400)
    assert host.log_path is not None
    log = host.log_path.read_text()
    assert "Traceback" not in log and "Error handling request" not in log
    lines = [line for line in log.splitlines() if "request refused" in line]
    assert lines and all(len(line) < 200 for line in lines)
    assert "b" * 300 not in log


# -- CORS from local.settings.json `Host` -------------------------------------------------------


def preflight(origin: str, method: str = "PATCH", headers: str = "content-type, if-match") -> bytes:
    return (
        b"OPTIONS /api/items/abc HTTP/1.1\r\nHost: h\r\nOrigin: "
        + origin.encode()
        + b"\r\nAccess-Control-Request-Method: "
        + method.encode()
        + b"\r\nAccess-Control-Request-Headers: "
        + headers.encode()
        + b"\r\nConnection: close\r\n\r\n"
    )


def test_a_preflight_from_an_allowed_origin_is_answered_by_the_host(host: RunningRunner) -> None:
    status, headers, body = exchange(host, preflight(ORIGIN))
    assert (status, body) == (204, b"")
    assert headers["access-control-allow-origin"] == ORIGIN
    assert headers["access-control-allow-methods"] == "PATCH"
    assert headers["access-control-allow-headers"] == "content-type,if-match"
    assert headers["access-control-allow-credentials"] == "true"
    assert headers["vary"] == "Origin"
    assert "access-control-max-age" not in headers


def test_a_preflight_from_another_origin_gets_no_cors_headers(host: RunningRunner) -> None:
    status, headers, _ = exchange(host, preflight(OTHER_ORIGIN))
    assert status == 204
    assert not [name for name in headers if name.startswith("access-control-")]


def test_answers_to_an_allowed_origin_carry_the_cors_headers_whatever_their_status(
    host: RunningRunner,
) -> None:
    for path, status in (("/api/items", 200), ("/api/nope", 404), ("/api/boom", 500)):
        reply = call(f"http://127.0.0.1:{host.port}{path}", headers={"Origin": ORIGIN})
        assert reply.status == status
        assert reply.headers["access-control-allow-origin"] == ORIGIN
        assert reply.headers["access-control-allow-credentials"] == "true"
        assert reply.headers["vary"] == "Origin"


def test_answers_to_another_or_no_origin_carry_no_cors_headers(host: RunningRunner) -> None:
    for headers in ({"Origin": OTHER_ORIGIN}, {}):
        reply = call(f"{host.url}/items", headers=headers)
        assert reply.status == 200
        assert not [name for name in reply.headers if name.startswith("access-control-")]


def test_an_options_request_that_is_not_a_preflight_goes_to_the_routes(
    host: RunningRunner,
) -> None:
    reply = call(f"{host.url}/items/abc", "OPTIONS", headers={"Origin": ORIGIN})
    assert reply.status == 404 and "allow" not in reply.headers  # no function takes OPTIONS
    assert reply.headers["access-control-allow-origin"] == ORIGIN


def test_without_cors_settings_a_preflight_reaches_the_routes(
    http_runner: RunningRunner,
) -> None:
    status, headers, _ = exchange(http_runner, preflight(ORIGIN))
    assert status == 404  # no function takes OPTIONS there
    assert "access-control-allow-origin" not in headers


def test_any_origin_answers_star_without_vary_and_star_with_credentials_does_not_start(
    tmp_path: Path,
) -> None:
    runner = start(tmp_path / "star", "sample_http_app.py", {"CORS": "*"})
    try:
        status, headers, _ = exchange(runner, preflight(OTHER_ORIGIN))
        assert status == 204 and headers["access-control-allow-origin"] == "*"
        assert "vary" not in headers and "access-control-allow-credentials" not in headers
    finally:
        runner.stop()
    with pytest.raises(RunnerStartError):
        start(tmp_path / "bad", "sample_http_app.py", {"CORS": "*", "CORSCredentials": True})
    assert "wildcard origin with credentials" in (tmp_path / "bad" / "runner.log").read_text()


# -- routing on the path as Kestrel hands it over -------------------------------------------------


def test_an_empty_segment_matches_no_route_and_one_trailing_slash_is_ignored(
    host: RunningRunner,
) -> None:
    for path in ("/items//x", "/items//", "//items"):
        reply = call(f"{host.url}{path}")
        assert reply.status == 404, path
        assert "allow" not in reply.headers
    assert call(f"{host.url}/items/").body == b"list"
    assert call(f"{host.url}/files/a//b/").body == b"a//b/"  # a catch-all keeps it all


def test_an_encoded_slash_stays_in_its_segment(host: RunningRunner) -> None:
    reply = call(f"{host.url}/items/%2F")
    assert reply.status == 200
    data = reply.json()
    assert isinstance(data, dict) and data["id"] == "%2F"  # the id route, not the list
    reply = call(f"{host.url}/items/a%2Fb")
    data = reply.json()
    assert isinstance(data, dict) and data["id"] == "a%2Fb"
    assert call(f"{host.url}/files/a%2Fb/c").body == b"a%2Fb/c"
    data = call(f"{host.url}/items/caf%C3%A9").json()
    assert isinstance(data, dict) and data["id"] == "café"  # other escapes are decoded


# -- no warning on every start ------------------------------------------------------------------


def test_an_app_without_http_functions_starts_without_the_auth_level_warning(
    tmp_path: Path,
) -> None:
    runner = start(tmp_path, "sample_timer_app.py")
    runner.stop()
    log = (tmp_path / "runner.log").read_text()
    assert "function yearly" in log or "yearly" in log
    assert AUTH_LEVEL_ADVICE not in log
    assert "WARNING" not in log
