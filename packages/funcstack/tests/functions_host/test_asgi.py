"""An ASGI app (FastAPI) on ``func.AsgiFunctionApp``, hosted as the Azure host hosts it: the
library's one ``/{*route}`` function (every method, ``http_type: asgi``, keys enforced) turns
the host's ``RpcHttp`` into an ASGI scope (``AsgiMiddleware``), and its answer comes back the
way ``RawScriptResult`` writes it. One host for the module, host.json ``routePrefix: ""``."""

from __future__ import annotations

import hashlib
import http.client
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from funcstack.deadlines import SHORT
from funcstack.functions_host._launcher import RunnerStartError, RunningRunner, start_runner
from funcstack.functions_host.testing import Reply, call

from .conftest import make_app_dir

pytestmark = pytest.mark.integration


def app_dir_with(tmp: Path, sample: str, host_json: dict[str, Any]) -> Path:
    app_dir = make_app_dir(tmp, sample, {"FUNCTIONS_WORKER_RUNTIME": "python"})
    (app_dir / "host.json").write_text(json.dumps(host_json))
    return app_dir


@pytest.fixture(scope="module")
def asgi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRunner]:
    tmp = tmp_path_factory.mktemp("asgi")
    app_dir = app_dir_with(
        tmp, "sample_asgi_app.py", {"version": "2.0", "extensions": {"http": {"routePrefix": ""}}}
    )
    runner = start_runner(
        app_dir=app_dir,
        settings_file=app_dir / "local.settings.json",
        log_path=tmp / "runner.log",
        enforce_keys=True,
    )
    try:
        yield runner
    finally:
        runner.stop()


def exchange(
    runner: RunningRunner,
    method: str,
    target: str,
    *,
    headers: list[tuple[str, str]] = (),  # type: ignore[assignment]
    body: bytes | None = None,
    key: bool = True,
) -> tuple[int, list[tuple[str, str]], bytes]:
    """One request with repeated headers allowed; the answer's headers as sent (repeats kept)."""
    conn = http.client.HTTPConnection("127.0.0.1", runner.port, timeout=SHORT)
    try:
        conn.putrequest(method, target, skip_accept_encoding=True)
        if key:
            assert runner.function_key
            conn.putheader("x-functions-key", runner.function_key)
        for name, value in headers:
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, [(k.lower(), v) for k, v in resp.getheaders()], resp.read()
    finally:
        conn.close()


def get(
    runner: RunningRunner,
    target: str,
    method: str = "GET",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    assert runner.function_key
    return call(
        f"http://127.0.0.1:{runner.port}{target}",
        method,
        body=body,
        headers={"x-functions-key": runner.function_key, **(headers or {})},
    )


def echo(runner: RunningRunner, target: str, **kwargs: Any) -> dict[str, Any]:
    status, _, body = exchange(runner, kwargs.pop("method", "GET"), target, **kwargs)
    assert status == 200, body
    data = json.loads(body)
    assert isinstance(data, dict)
    return data


# -- the route ---------------------------------------------------------------------------------


def test_the_catch_all_hands_every_path_to_the_app_as_sent(asgi: RunningRunner) -> None:
    data = echo(asgi, "/echo/a/b")
    assert (data["path"], data["rest"], data["root_path"]) == ("/echo/a/b", "a/b", "")
    assert data["server"] == ["127.0.0.1", asgi.port]
    assert json.loads(get(asgi, "/").body) == {"at": "root"}  # the site root too


def test_a_trailing_slash_reaches_the_app_as_sent(asgi: RunningRunner) -> None:
    assert echo(asgi, "/echo/a/")["path"] == "/echo/a/"
    assert echo(asgi, "/echo/a")["path"] == "/echo/a"


def test_percent_escapes_reach_the_app_as_the_host_writes_its_url(asgi: RunningRunner) -> None:
    # The host writes RpcHttp.url from Kestrel's decoded path, escaped again as PathString does
    # (ToUriComponent: %2F stays, other escapes are decoded then re-escaped where needed); the
    # library's middleware unquotes that URL's path for the scope.
    data = echo(asgi, "/echo/caf%C3%A9/a%20b/x%2Fy/%7Euser/%21")
    assert data["path"] == "/echo/café/a b/x/y/~user/!"
    assert data["raw_path"] == data["path"].encode().decode("latin-1")
    # "%2541": Kestrel decodes "%25" once, to "%41", which PathString keeps as an escape: the
    # app sees "A"
    assert echo(asgi, "/echo/%2541/%25zz")["path"] == "/echo/A/%zz"


def test_dot_segments_are_removed_before_the_app_sees_the_path(asgi: RunningRunner) -> None:
    assert echo(asgi, "/echo/a/./b/../c")["path"] == "/echo/a/c"


def test_the_query_string_reaches_the_app_as_sent(asgi: RunningRunner) -> None:
    data = echo(asgi, "/echo/q?tag=a&tag=b&empty=&plus=a+b&sp=%20x")
    assert data["query_string"] == "tag=a&tag=b&empty=&plus=a+b&sp=%20x"
    assert data["query"] == [
        ["tag", "a"],
        ["tag", "b"],
        ["empty", ""],
        ["plus", "a b"],
        ["sp", " x"],
    ]


def test_request_headers_reach_the_app_lower_cased_with_repeats_joined(asgi: RunningRunner) -> None:
    data = echo(
        asgi,
        "/echo/h",
        headers=[("X-Multi", "one"), ("X-Multi", "two"), ("X-Empty", ""), ("Accept", "text/plain")],
    )
    headers = dict(data["headers"])
    assert len(headers) == len(data["headers"])  # one line per name
    assert headers["x-multi"] == "one,two"
    assert headers["x-empty"] == ""
    assert headers["accept"] == "text/plain"
    assert headers["x-functions-key"] == asgi.function_key  # nothing stripped, as in Azure
    assert all(name == name.lower() for name in headers)


# -- bodies ------------------------------------------------------------------------------------


def test_a_json_body_round_trips(asgi: RunningRunner) -> None:
    reply = get(
        asgi,
        "/json",
        "POST",
        body=json.dumps({"a": [1, "é"]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"
    assert reply.json() == {"received": {"a": [1, "é"]}}


def test_a_binary_body_round_trips(asgi: RunningRunner) -> None:
    body = bytes(range(256)) * 4
    reply = get(
        asgi, "/bytes", "POST", body=body, headers={"Content-Type": "application/octet-stream"}
    )
    assert (reply.status, reply.body) == (200, body)
    assert reply.headers["content-type"] == "application/octet-stream"


def test_an_empty_body_reaches_the_app_as_empty(asgi: RunningRunner) -> None:
    for body in (None, b""):
        data = echo(asgi, "/echo/e", method="POST", body=body)
        assert data["body_length"] == 0


def test_a_large_body_reaches_the_app_whole(asgi: RunningRunner) -> None:
    body = bytes(range(256)) * (24 * 4096)  # 24 MB, under Kestrel's 100 MB MaxRequestBodySize
    data = echo(asgi, "/echo/big", method="PUT", body=body)
    assert data["body_length"] == len(body)
    assert data["body_sha256"] == hashlib.sha256(body).hexdigest()


# -- methods -----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_every_method_the_library_registers_reaches_the_app(
    asgi: RunningRunner, method: str
) -> None:
    assert echo(asgi, "/echo/m", method=method)["method"] == method


def test_head_reaches_the_app_and_the_answer_has_no_body(asgi: RunningRunner) -> None:
    status, headers, body = exchange(asgi, "HEAD", "/only-get-head")
    assert (status, body) == (200, b"")
    assert dict(headers)["x-head"] == "yes"
    assert dict(headers)["content-type"].startswith("text/plain")


def test_a_method_the_library_does_not_register_is_404_from_the_host(asgi: RunningRunner) -> None:
    # AsgiFunctionApp registers GET POST DELETE HEAD PATCH PUT OPTIONS QUERY: the host's route
    # does not match TRACE, and no other does.
    status, headers, body = exchange(asgi, "TRACE", "/echo/t")
    assert (status, body) == (404, b"")
    assert "allow" not in dict(headers)


# -- answers -----------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [200, 201, 204, 304, 404, 418, 503])
def test_the_apps_status_code_is_the_answers(asgi: RunningRunner, code: int) -> None:
    status, headers, body = exchange(asgi, "GET", f"/status/{code}")
    assert status == code
    assert body == b""
    if code == 304:
        assert dict(headers)["etag"] == '"v1"'
    else:
        assert dict(headers)["x-status"] == str(code)


def test_several_set_cookie_lines_come_back_as_the_host_writes_cookies(asgi: RunningRunner) -> None:
    # The library moves every Set-Cookie into RpcHttp.cookies (http.cookies parsing); the host
    # appends each through ASP.NET Core's ResponseCookies: the value escaped
    # (Uri.EscapeDataString), attributes lower-cased in its order, an absent domain or path
    # written as an empty "domain=" / "path=" (the worker sends empty strings).
    status, headers, _ = exchange(asgi, "GET", "/cookies")
    assert status == 200
    cookies = [value for name, value in headers if name == "set-cookie"]
    assert cookies[0] == (
        "session=a%20b%2Fc; max-age=3600; domain=example.com; path=/app; "
        "secure; samesite=strict; httponly"
    )
    assert cookies[1] == "theme=dark; domain=; path=/; samesite=lax"
    # delete_cookie: expires "now" (RFC 1123, as ASP.NET Core formats dates), max-age 0
    assert re.fullmatch(
        r"old=; expires=\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT; max-age=0; "
        r"domain=; path=/; samesite=lax",
        cookies[2],
    ), cookies[2]
    assert len(cookies) == 3


def test_a_repeated_response_header_keeps_its_last_value(asgi: RunningRunner) -> None:
    # RpcHttp.headers is a map: the library keeps the last of a repeated name.
    _, headers, _ = exchange(asgi, "GET", "/cookies")
    assert [value for name, value in headers if name == "x-repeated"] == ["two"]
    assert dict(headers)["content-type"] == "application/json"


def test_a_streaming_response_is_buffered_and_arrives_whole(asgi: RunningRunner) -> None:
    reply = get(asgi, "/stream")
    assert reply.status == 200
    assert reply.body == b"".join(f"chunk {i}\n".encode() for i in range(5))
    assert reply.headers["content-type"] == "text/plain; charset=utf-8"


def test_an_exception_in_a_route_is_500_with_no_body(asgi: RunningRunner) -> None:
    reply = get(asgi, "/boom")
    assert (reply.status, reply.body) == (500, b"")  # not Starlette's "Internal Server Error"


def test_the_apps_own_404_is_its_answer(asgi: RunningRunner) -> None:
    reply = get(asgi, "/nowhere")
    assert reply.status == 404 and reply.json() == {"detail": "Not Found"}


# -- beside other functions; keys --------------------------------------------------------------


def test_routes_are_tried_in_the_order_of_the_function_names(asgi: RunningRunner) -> None:
    # The host maps routes in the order of the functions' names (case-insensitive) and the
    # first that matches wins, whatever ASP.NET Core's precedence would say:
    # "health" < "http_app_func" (the ASGI function) < "status_page".
    assert get(asgi, "/health").body == b"healthy from the http function"
    reply = get(asgi, "/status-page")
    assert reply.status == 404 and reply.json() == {"detail": "Not Found"}  # FastAPI's answer
    # a method the earlier route does not take goes on to the next route that matches
    reply = get(asgi, "/health", "POST")
    assert reply.status == 404 and reply.json() == {"detail": "Not Found"}  # the app's, not 405


def test_keys_are_enforced_on_the_asgi_function(asgi: RunningRunner) -> None:
    status, _, body = exchange(asgi, "GET", "/echo/x", key=False)
    assert (status, body) == (401, b"")
    status, _, _ = exchange(asgi, "GET", "/echo/x?code=" + str(asgi.function_key), key=False)
    assert status == 200
    assert call(f"http://127.0.0.1:{asgi.port}/health").status == 200  # anonymous beside it


# -- the route prefix --------------------------------------------------------------------------


def test_with_a_route_prefix_the_host_does_not_start(tmp_path: Path) -> None:
    # host.json's routePrefix ("api" unless set) + "/" + the library's "/{*route}" is the
    # template "api//{*route}", which ASP.NET Core refuses: the Azure host does not start
    # (azure-functions-python-worker#1310); only routePrefix "" serves an AsgiFunctionApp.
    app_dir = app_dir_with(tmp_path, "sample_asgi_app.py", {"version": "2.0"})
    try:
        runner = start_runner(
            app_dir=app_dir,
            settings_file=app_dir / "local.settings.json",
            log_path=tmp_path / "runner.log",
        )
    except RunnerStartError as exc:
        failure = str(exc)
    else:
        runner.stop()
        pytest.fail("the host started under routePrefix 'api'")
    assert (
        "An error occurred while creating the route with name 'http_app_func' and template "
        "'api//{*route}'."
    ) in failure
    assert "The route template separator character '/' cannot appear consecutively." in failure
