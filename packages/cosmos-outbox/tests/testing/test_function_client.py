"""`FunctionClient` routes as the host does under the app's route prefix (host.json's
`extensions.http.routePrefix`): the function sees the URL the host would give it; a plain
script that calls an ASGI app through it ends when it is done."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import azure.functions as func
import pytest
from conftest import TicketWorld
from deadlines import SHORT

from cosmos_outbox.documents import EVENT_TYPE
from cosmos_outbox_testing import FunctionClient


def _app() -> func.FunctionApp:
    app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)

    @app.route(route="hello/{name}", methods=["GET"])
    def hello(req: func.HttpRequest) -> func.HttpResponse:
        return func.HttpResponse(f"{req.route_params['name']} at {req.url}")

    return app


@pytest.mark.parametrize(
    ("prefix", "url"),
    [
        ("api", "http://localhost/api/hello/ada"),
        ("", "http://localhost/hello/ada"),
        ("/v1/", "http://localhost/v1/hello/ada"),
    ],
)
def test_a_request_is_routed_under_the_route_prefix(prefix: str, url: str) -> None:
    with FunctionClient(_app(), route_prefix=prefix) as client:
        reply = client.request("GET", "hello/ada")
        assert reply.get_body().decode() == f"ada at {url}"


def test_the_default_prefix_is_the_hosts_and_a_path_no_route_takes_is_named() -> None:
    with FunctionClient(_app()) as client:
        assert client.route("GET", "hello/ada") == ("hello", {"name": "ada"})
        with pytest.raises(LookupError, match="GET /api/bye"):
            client.route("GET", "bye")


#: A plain ASGI app with a lifespan (as FastAPI's), its function app in a module of its own.
ASGI_APP = """
import azure.functions as func


async def api(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


app = func.AsgiFunctionApp(app=api, http_auth_level=func.AuthLevel.ANONYMOUS)
"""
SCRIPTS = {
    "closed": "with FunctionClient(app, route_prefix='') as client:\n"
    "    print(client.request('GET', 'hello').get_body().decode())\n",
    "left open": "client = FunctionClient(app, route_prefix='')\n"
    "print(client.request('GET', 'hello').get_body().decode())\n",
}


@pytest.mark.parametrize("script", SCRIPTS, ids=list(SCRIPTS))
def test_a_plain_script_on_an_asgi_app_ends(tmp_path: Path, script: str) -> None:
    """The script (not pytest) exits once it is done: the client shuts the ASGI app's lifespan
    down on its own loop, so azure-functions' `AsgiFunctionApp.__del__` has nothing left to run
    at exit (it ran the shutdown on a new loop, which waited for ever)."""
    (tmp_path / "asgi_app.py").write_text(ASGI_APP)
    (tmp_path / "script.py").write_text(
        "from cosmos_outbox_testing import FunctionClient\nfrom asgi_app import app\n"
        + SCRIPTS[script]
    )
    try:
        done = subprocess.run(
            [sys.executable, "script.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=SHORT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the script did not end within {SHORT:g} s: it hangs at interpreter exit")
    assert (done.returncode, done.stdout.strip()) == (0, "hello"), done.stderr


def _stock_app() -> func.FunctionApp:
    app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)

    @app.route(route="stock/{warehouseId}", methods=["GET"])
    def stock(req: func.HttpRequest) -> func.HttpResponse:
        seen = {"route": dict(req.route_params), "params": dict(req.params), "url": req.url}
        return func.HttpResponse(json.dumps(seen))

    return app


def test_a_query_string_in_the_path_becomes_params_as_the_host_splits_it() -> None:
    """The host routes the path only: `stock/wh-1?lowerThan=10` is `warehouseId` `wh-1` with
    the query value in `params` (a repeated name's values joined with `,`, `+` a space, a name
    without a value left out, as `RpcHttp.query`), merged with `params=`; the URL keeps it."""
    with FunctionClient(_stock_app()) as client:
        assert client.route("GET", "stock/wh-1?lowerThan=10") == (
            "stock",
            {"warehouseId": "wh-1"},
        )
        reply = client.request(
            "GET", "stock/wh-1?lowerThan=10&tag=a&tag=b+c&empty=", params={"page": "2"}
        )
        seen = json.loads(reply.get_body())
        assert seen == {
            "route": {"warehouseId": "wh-1"},
            "params": {"lowerThan": "10", "tag": "a,b c", "page": "2"},
            "url": "http://localhost/api/stock/wh-1?lowerThan=10&tag=a&tag=b+c&empty=",
        }
        with pytest.raises(ValueError, match="lowerThan given both in the path's query string"):
            client.request("GET", "stock/wh-1?lowerThan=10", params={"lowerThan": "5"})


TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_function_gets_the_invocation_context_the_host_passes() -> None:
    """A parameter named `context` gets the invocation's context: its trace context (W3C
    traceparent, as the host takes it from the request) and a first attempt's retry context."""
    app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)

    @app.route(route="traced", methods=["GET"])
    def traced(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
        retry = context.retry_context
        return func.HttpResponse(
            f"{context.trace_context.trace_parent} {retry.retry_count}/{retry.max_retry_count}"
        )

    with FunctionClient(app) as client:
        reply = client.request("GET", "traced", trace_parent=TRACE)
    assert reply.get_body().decode() == f"{TRACE} 0/0"


def test_the_events_a_route_writes_carry_the_invocations_trace_context(
    world: TicketWorld,
) -> None:
    reply = world.client.request("POST", "tickets", body={"title": "T"}, trace_parent=TRACE)
    assert reply.status_code == 201
    [event] = world.memory.store.of_type(EVENT_TYPE)
    assert event["traceparent"] == TRACE


def test_route_values_are_the_hosts_a_catch_all_takes_the_rest_of_the_path() -> None:
    app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)

    @app.route(route="files/{*rest}", methods=["GET"])
    def files(req: func.HttpRequest) -> func.HttpResponse:
        return func.HttpResponse(json.dumps(dict(req.route_params)))

    @app.route(route="Orders/{id:int}/lines/{line}", methods=["GET"])
    def lines(req: func.HttpRequest) -> func.HttpResponse:
        return func.HttpResponse(json.dumps(dict(req.route_params)))

    with FunctionClient(app) as client:
        assert client.route("GET", "files/a/b.txt") == ("files", {"rest": "a/b.txt"})
        assert client.route("GET", "orders/7/lines/2/") == ("lines", {"id": "7", "line": "2"})
        with pytest.raises(LookupError):
            client.route("GET", "orders/7/lines/")  # an empty segment takes no value
        with pytest.raises(LookupError):
            client.route("GET", "folders/a")
