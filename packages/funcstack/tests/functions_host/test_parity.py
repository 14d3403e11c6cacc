"""Host parity: the local host and the real worker library answer as Azure does.

Each test names a behaviour where a runner that calls the app itself would differ from the
Functions host + Python worker (azure_functions_runtime), and asserts the Azure behaviour.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from funcstack.deadlines import LONG, LOOPBACK, SHORT, wait_for
from funcstack.functions_host._launcher import RunnerStartError, RunningRunner, start_runner
from funcstack.functions_host.testing import call

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent


def _app(tmp: Path, source: str, host_json: dict[str, object] | None = None) -> Path:
    app_dir = tmp / "app"
    app_dir.mkdir()
    (app_dir / "function_app.py").write_text(source)
    (app_dir / "host.json").write_text(json.dumps(host_json or {"version": "2.0"}))
    return app_dir


TICKS: dict[str, Path] = {}


@pytest.fixture(scope="module")
def parity(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRunner]:
    tmp = tmp_path_factory.mktemp("parity")
    TICKS["out"] = tmp / "ticks.jsonl"
    app_dir = _app(
        tmp,
        (HERE / "sample_parity_app.py").read_text(),
        {"version": "2.0", "functionTimeout": "00:00:02"},
    )
    runner = start_runner(
        app_dir=app_dir,
        settings={"PARITY_OUT": str(tmp / "ticks.jsonl")},
        log_path=tmp / "host.log",
    )
    try:
        yield runner
    finally:
        runner.stop()


def _log(runner: RunningRunner) -> str:
    assert runner.log_path is not None
    return runner.log_path.read_text()


def test_http_function_returning_none_fails_the_invocation(parity: RunningRunner) -> None:
    reply = call(f"{parity.url}/returns-none")
    assert (reply.status, reply.body) == (500, b"")


def test_http_function_returning_bytes_fails_the_invocation(parity: RunningRunner) -> None:
    reply = call(f"{parity.url}/returns-bytes")
    assert (reply.status, reply.body) == (500, b"")


def test_unhandled_exception_is_500_with_no_body(parity: RunningRunner) -> None:
    reply = call(f"{parity.url}/raises")
    assert (reply.status, reply.body, "content-type" in reply.headers) == (500, b"", False)
    assert "secret detail" in _log(parity)  # the host logs it; the client never sees it


def test_repeated_query_keys_are_joined_and_empty_values_dropped(parity: RunningRunner) -> None:
    data = call(f"{parity.url}/echo?a=1&a=2&empty=&b=x").json()
    assert isinstance(data, dict)
    assert data["params"] == {"a": "1,2", "b": "x"}


def test_repeated_headers_are_joined_with_a_comma(parity: RunningRunner) -> None:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", parity.port, timeout=LOOPBACK)
    try:
        conn.putrequest("GET", "/api/echo")
        conn.putheader("X-Twice", "one")
        conn.putheader("X-Twice", "two")
        conn.putheader("X-Empty", "")
        conn.endheaders()
        data = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    assert data["headers"] == {"x-twice": "one,two", "x-empty": ""}


def _echo_with_header(parity: RunningRunner, value: bytes) -> tuple[int, bytes, str | None]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", parity.port, timeout=LOOPBACK)
    try:
        conn.putrequest("GET", "/api/echo")
        conn.putheader("X-Text", value)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read(), response.headers.get("content-type")
    finally:
        conn.close()


def test_header_values_are_utf_8_and_other_bytes_are_refused_before_the_app(
    parity: RunningRunner,
) -> None:
    """Kestrel decodes header values as UTF-8; other bytes get a bodyless 400 from the host."""
    status, body, _ = _echo_with_header(parity, "čaj ☕".encode())
    assert status == 200
    assert json.loads(body)["headers"]["x-text"] == "čaj ☕"
    status, body, content_type = _echo_with_header(parity, "café".encode("latin-1"))
    assert (status, body, content_type) == (400, b"", None)


def test_trigger_returning_a_value_without_return_binding_fails_and_is_retried(
    parity: RunningRunner,
) -> None:
    out = TICKS["out"]

    def retries() -> list[int]:
        lines = out.read_text().splitlines() if out.exists() else []
        return [json.loads(line)["retry"] for line in lines]

    wait_for(lambda: 1 in retries(), "a tick retried", every=0.2)
    assert 0 in retries()  # failed, then retried once per the policy
    assert "without a $return binding" in _log(parity)


def test_function_timeout_fails_the_invocation_and_restarts_the_worker(
    parity: RunningRunner,
) -> None:
    """functionTimeout 2 s (the fixture's host.json): an invocation that would sleep longer
    than any deadline here is failed (500) at its timeout, never before it; the worker that
    ran it is replaced. How long the 500 took is printed, not asserted."""
    import http.client

    before = call(f"{parity.url}/pid").body
    conn = http.client.HTTPConnection("127.0.0.1", parity.port, timeout=SHORT)
    started = time.monotonic()
    try:
        conn.request("GET", f"/api/sleep/{int(10 * LONG)}")  # it would outlive the test
        status = conn.getresponse().status
    finally:
        conn.close()
    took = time.monotonic() - started
    assert status == 500
    assert took >= 2.0  # not before its timeout
    print(f"the invocation failed {took:.1f} s after it was called (functionTimeout 2 s)")

    def new_worker() -> bytes:
        answer = call(f"{parity.url}/pid")
        return answer.body if answer.status == 200 else b""

    after = wait_for(new_worker, "the app served again")
    assert after != before  # a new worker process serves the app
    assert "function timeout" in _log(parity)


def test_misnamed_context_parameter_refuses_to_index_the_whole_app(tmp_path: Path) -> None:
    app_dir = _app(
        tmp_path,
        "import azure.functions as func\n"
        "app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)\n"
        "@app.route(route='ok')\n"
        "def ok(req: func.HttpRequest) -> func.HttpResponse:\n"
        "    return func.HttpResponse('ok')\n"
        "@app.route(route='ctx')\n"
        "def ctx(req: func.HttpRequest, ctx: func.Context) -> func.HttpResponse:\n"
        "    return func.HttpResponse('never')\n",
    )
    with pytest.raises(RunnerStartError):
        start_runner(app_dir=app_dir, log_path=tmp_path / "host.log", timeout=LONG)
    log = (tmp_path / "host.log").read_text()
    assert "worker init (indexing) failed" in log
    assert "ctx" in log


def test_fractional_retry_intervals_fail_indexing_as_in_azure(tmp_path: Path) -> None:
    app_dir = _app(
        tmp_path,
        "import azure.functions as func\n"
        "app = func.FunctionApp()\n"
        "@app.retry(strategy='fixed_delay', max_retry_count='3', delay_interval='00:00:00.5')\n"
        "@app.timer_trigger(arg_name='t', schedule='0 0 * * * *')\n"
        "def tick(t: func.TimerRequest) -> None:\n"
        "    pass\n",
    )
    with pytest.raises(RunnerStartError):
        start_runner(app_dir=app_dir, log_path=tmp_path / "host.log", timeout=LONG)
    assert "unconverted data remains" in (tmp_path / "host.log").read_text()
