"""`FunctionClient` routes as the host does under the app's route prefix (host.json's
`extensions.http.routePrefix`): the function sees the URL the host would give it."""

from __future__ import annotations

import azure.functions as func
import pytest

from cosmos_outbox.testing import FunctionClient


def _app() -> func.FunctionApp:
    app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)

    @app.route(route="hello/{name}", methods=["GET"])
    def hello(req: func.HttpRequest) -> func.HttpResponse:
        return func.HttpResponse(f"{req.route_params['name']} at {req.url}")

    return app


@pytest.mark.parametrize(("prefix", "url"), [
    ("api", "http://localhost/api/hello/ada"),
    ("", "http://localhost/hello/ada"),
    ("/v1/", "http://localhost/v1/hello/ada"),
])
def test_a_request_is_routed_under_the_route_prefix(prefix: str, url: str) -> None:
    with FunctionClient(_app(), route_prefix=prefix) as client:
        reply = client.request("GET", "hello/ada")
        assert reply.get_body().decode() == f"ada at {url}"


def test_the_default_prefix_is_the_hosts_and_a_path_no_route_takes_is_named() -> None:
    with FunctionClient(_app()) as client:
        assert client.route("GET", "hello/ada") == ("hello", {"name": "ada"})
        with pytest.raises(LookupError, match="GET /api/bye"):
            client.route("GET", "bye")
