"""The local host serves HTTP-triggered functions the way `func start` does."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from funcstack.functions_host._launcher import RunningRunner, start_runner
from funcstack.functions_host.testing import call

pytestmark = pytest.mark.integration


def test_sync_function_gets_route_params_query_and_headers(http_runner: RunningRunner) -> None:
    reply = call(f"{http_runner.url}/items/abc?x=1&y=two", headers={"X-Test": "hello"})
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("application/json")
    data = reply.json()
    assert isinstance(data, dict)
    assert data["id"] == "abc"
    assert data["params"] == {"x": "1", "y": "two"}
    assert data["x_test"] == "hello"
    assert data["method"] == "GET"
    assert data["url"].endswith("/api/items/abc?x=1&y=two")


def test_async_function_echoes_body_with_status_and_headers(http_runner: RunningRunner) -> None:
    item = str(uuid.uuid4())
    reply = call(f"{http_runner.url}/items/{item}/echo", "POST", body=b"\x00raw bytes\xff")
    assert reply.status == 201
    assert reply.body == b"\x00raw bytes\xff"
    assert reply.headers["location"] == f"/api/items/{item}"
    assert reply.headers["x-async"] == "yes"
    assert reply.headers["content-type"] == "application/octet-stream"


def test_route_constraint_rejects_non_matching_values(http_runner: RunningRunner) -> None:
    assert call(f"{http_runner.url}/items/not-a-guid/echo", "POST", body=b"x").status == 404
    assert call(f"{http_runner.url}/status/abc").status == 404


def test_same_route_is_dispatched_by_method(http_runner: RunningRunner) -> None:
    assert call(f"{http_runner.url}/items").body == b"list"
    created = call(
        f"{http_runner.url}/items",
        "POST",
        body=json.dumps({"a": 1}).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert created.status == 201
    assert created.json() == {"a": 1}


def test_status_codes_are_mapped(http_runner: RunningRunner) -> None:
    assert call(f"{http_runner.url}/status/204").status == 204
    assert call(f"{http_runner.url}/status/412").status == 412
    reply = call(f"{http_runner.url}/status/200")
    assert reply.status == 200
    assert reply.headers["content-type"] == "text/plain; charset=utf-8"


def test_a_str_returned_is_utf_8_text_as_the_host_writes_it(http_runner: RunningRunner) -> None:
    """A ``str`` answer goes through ASP.NET Core's ``StringOutputFormatter`` in the host
    (``HttpBinding.CreateResult`` -> ``RawScriptResult``), which writes ``text/plain;
    charset=utf-8``: a client reads non-ASCII text right (Microsoft's blob checks read it
    so). funcstack wrote ``text/plain`` alone, which clients read as ISO-8859-1."""
    reply = call(f"{http_runner.url}/greeting")
    assert reply.status == 200
    assert reply.headers["content-type"] == "text/plain; charset=utf-8"
    assert reply.body.decode("utf-8") == "Grüße, 世界 ✓"


def test_catch_all_parameter(http_runner: RunningRunner) -> None:
    assert call(f"{http_runner.url}/files/a/b/c.txt").body == b"a/b/c.txt"


def test_unknown_route_and_wrong_method_are_404_with_no_body(http_runner: RunningRunner) -> None:
    assert call(f"{http_runner.url}/nope").status == 404
    assert call(f"http://127.0.0.1:{http_runner.port}/items").status == 404  # no /api prefix
    # the host's routes are a RouteCollection: a route whose method constraint fails does not
    # match, and nothing answers 405 (azure-functions-host#10098, #11625)
    reply = call(f"{http_runner.url}/items/abc", "DELETE")
    assert (reply.status, reply.body) == (404, b"")
    assert "allow" not in reply.headers


def test_the_landing_page_answers_204_when_disabled_and_the_status_needs_no_key_unenforced(
    http_runner: RunningRunner,
) -> None:
    """``AzureWebJobsDisableHomepage=true``: ``/`` answers 204 with no body, as the host's
    ``HomepageMiddleware``; ``/admin/host/status`` without keys enforced needs none (as every
    admin route with ``func start``)."""
    root = f"http://127.0.0.1:{http_runner.port}"
    reply = call(f"{root}/")
    assert (reply.status, reply.body) == (204, b"")
    status = call(f"{root}/admin/host/status")
    assert status.status == 200
    data = status.json()
    assert isinstance(data, dict) and data["state"] == "Running"
    assert data["instanceId"] == ""  # no WEBSITE_INSTANCE_ID: one host, not an instance


def test_exception_becomes_500_with_no_body_as_the_host_answers(
    http_runner: RunningRunner,
) -> None:
    reply = call(f"{http_runner.url}/boom")
    assert reply.status == 500
    assert reply.body == b""


def test_settings_reach_the_app_and_binding_expressions(http_runner: RunningRunner) -> None:
    assert call(f"{http_runner.url}/setting").body == b"from-local-settings"
    assert call(f"{http_runner.url}/by-setting").body == b"from setting route"


def test_context_carries_a_child_of_the_callers_trace(http_runner: RunningRunner) -> None:
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    reply = call(f"{http_runner.url}/ctx", headers={"traceparent": traceparent})
    data = reply.json()
    assert isinstance(data, dict)
    assert data["function_name"] == "with_context"
    version, trace_id, span_id, flags = data["traceparent"].split("-")
    assert (version, trace_id, flags) == ("00", "0af7651916cd43dd8448eb211c80319c", "01")
    assert span_id != "b7ad6b7169203331"  # the invocation is a span of its own
    assert uuid.UUID(data["invocation_id"])


def test_function_disabled_by_app_setting_is_not_served(http_runner: RunningRunner) -> None:
    assert call(f"{http_runner.url}/disabled").status == 404


def test_one_structured_log_line_per_request(http_runner: RunningRunner) -> None:
    marker = uuid.uuid4().hex
    call(f"{http_runner.url}/items/{marker}")
    assert http_runner.log_path is not None
    lines = [
        line
        for line in Path(http_runner.log_path).read_text().splitlines()
        if marker in line and "http request" in line
    ]
    assert len(lines) == 1
    assert "method=GET" in lines[0]
    assert "function=get_item" in lines[0]
    assert "status=200" in lines[0]
    assert "ms=" in lines[0]


def test_sigterm_stops_the_runner_cleanly(tmp_path: Path) -> None:
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "function_app.py").write_text(
        (Path(__file__).parent / "sample_http_app.py").read_text()
    )
    runner = start_runner(
        app_dir=app_dir, settings={"SAMPLE_ROUTE": "r"}, log_path=tmp_path / "runner.log"
    )
    try:
        assert call(f"{runner.url}/items").status == 200
    finally:
        runner.stop()
    assert runner.process.returncode == 0
    assert "host stopped" in (tmp_path / "runner.log").read_text()


LEAKY_APP = """
import aiohttp
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)
_kept = []


@app.route(route="open")
async def open_session(req: func.HttpRequest) -> func.HttpResponse:
    _kept.append(aiohttp.ClientSession())  # never closed, as an SDK client an app caches
    return func.HttpResponse("opened")
"""


def test_a_stop_says_nothing_of_what_the_app_left_open(tmp_path: Path) -> None:
    """The worker ends once it has stopped, as the Azure host ends its worker after
    WorkerTerminate: the interpreter's teardown does not collect the app's open clients, which
    logged `Unclosed client session` (and, in a bigger app, `TypeError: 'NoneType' object is
    not iterable` from their `__del__`) at every stop, into the terminal too."""
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "function_app.py").write_text(LEAKY_APP)
    runner = start_runner(app_dir=app_dir, log_path=tmp_path / "runner.log")
    try:
        assert call(f"{runner.url}/open").body == b"opened"
    finally:
        runner.stop()
    log = (tmp_path / "runner.log").read_text()
    assert "host stopped" in log
    assert "Unclosed" not in log and "Traceback" not in log and "Logging error" not in log
