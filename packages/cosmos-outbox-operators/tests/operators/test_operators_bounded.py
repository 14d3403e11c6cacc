"""The operators' routes and /health in a Functions host (operators_app: the `aio` outbox on the
SDKs' `aio` clients, on funcstack's host through `funcstack_app`) when the store or the broker
hangs (its process stopped): each answers 503 with Retry-After within the bound
(`cosmos_outbox.http.bounded.BOUND_SECONDS`), never a 500 nor the SDKs' own waits, and
answers again once the endpoint is back. The requests of one hang are sent at once: each must
be answered within the bound of its own. The endpoints stopped are the session's stack's, for
the length of one test (resumed whatever happens)."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

pytest.importorskip(
    "funcstack",
    reason=(
        "funcstack in this interpreter (Python 3.13+) runs these tests: "
        "they host an app on funcstack's Functions host and stop its services"
    ),
)

from conftest import DATABASE
from deadlines import SHORT, scaled

from cosmos_outbox import Outbox, Services
from cosmos_outbox.cosmos import CosmosDocumentStore
from cosmos_outbox.documents import EVENT_TYPE, read_feed
from cosmos_outbox.http.bounded import BOUND_RETRY_AFTER_SECONDS, BOUND_SECONDS
from cosmos_outbox.ports import MessagePublisher
from cosmos_outbox.relay import Quarantine
from cosmos_outbox_testing import run_sync
from funcstack import LocalStack
from funcstack.pytest_plugin import HostedApp

pytestmark = pytest.mark.integration

OPERATORS_APP = Path(__file__).parents[1] / "operators_app"


@contextmanager
def frozen(pid: int) -> Iterator[None]:
    """The process stopped (SIGSTOP) for the block, then resumed: an endpoint that hangs. The
    kernel still completes TCP handshakes on its listening socket and takes requests into the
    socket buffers, but nothing answers."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


class Reply:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.body = status, body
        self.headers = {name.lower(): value for name, value in headers.items()}

    def json(self) -> Any:
        return json.loads(self.body)


def call(app: HostedApp, method: str, path: str, payload: Any = None) -> Reply:
    url = urlsplit(f"{app.url}/{path}")
    connection = http.client.HTTPConnection(url.netloc, timeout=scaled(BOUND_SECONDS + 20))
    try:
        body = None if payload is None else json.dumps(payload).encode()
        target = f"{url.path}?{url.query}" if url.query else url.path
        connection.request(method, target, body=body, headers={"content-type": "application/json"})
        response = connection.getresponse()
        return Reply(response.status, dict(response.getheaders()), response.read())
    finally:
        connection.close()


def unavailable(reply: Reply, took: float) -> None:
    assert reply.status == 503, reply.body
    assert reply.headers["content-type"].startswith("application/problem+json")
    assert reply.headers["retry-after"] == str(BOUND_RETRY_AFTER_SECONDS)
    # the bound's words, or a dependency's own wait naming it ("Cosmos DB did not answer within
    # 3 s": what a loaded machine reaches first)
    assert re.search(r"did not answer within \d+(\.\d+)? s", reply.json()["detail"]), reply.json()
    # the bound, and what the host and the test add: requests sent at once to one worker on a
    # loaded machine (make test at a load average of 14: 7.3 s); a hang would be the client's
    # whole timeout, far beyond
    assert took < scaled(2 * BOUND_SECONDS + 4), took


def at_once(app: HostedApp, requests: list[tuple[str, str, Any]]) -> list[tuple[Reply, float]]:
    """The requests sent together; each one's reply and how long it took."""

    def timed(request: tuple[str, str, Any]) -> tuple[Reply, float]:
        start = time.monotonic()
        reply = call(app, *request)
        return reply, time.monotonic() - start

    with ThreadPoolExecutor(len(requests)) as pool:
        return list(pool.map(timed, requests))


def until(app: HostedApp, method: str, path: str, ok: Callable[[Reply], bool]) -> Reply:
    """The route answers as `ok` wants once the endpoint is back (condition, not duration)."""
    deadline = time.monotonic() + SHORT
    while True:
        reply = call(app, method, path)
        if ok(reply) or time.monotonic() > deadline:
            return reply
        time.sleep(0.5)


def _not_relaying() -> MessagePublisher:
    raise AssertionError("the test only writes")


def quarantined(stack: LocalStack, container: str) -> str:
    """An event committed and put in the quarantine as the relay would: its id."""
    outbox = Outbox()
    store = CosmosDocumentStore(stack.container_client(DATABASE, container))
    with (
        outbox.override(Services(store=store, publisher=_not_relaying, token_secret="t")),
        outbox.transaction(f"t-{uuid.uuid4().hex[:8]}", entity="ticket") as transaction,
    ):
        transaction.publish("TicketOpenedEvent", {"title": "Printer"})
        transaction.commit()
    [document] = store.of_type(EVENT_TYPE)
    [event] = read_feed([document])
    run_sync(Quarantine(store).put(event, reason="set aside by the test"))  # type: ignore[arg-type]
    return str(document["id"])


@pytest.fixture
def operators(funcstack_app: Callable[..., HostedApp], fresh: str) -> HostedApp:
    return funcstack_app(OPERATORS_APP, settings={"COSMOS_CONTAINER": fresh}, enforce_keys=False)


def test_every_operator_route_and_health_answer_503_within_the_bound_when_the_store_hangs(
    funcstack_services: LocalStack, operators: HostedApp, fresh: str
) -> None:
    event_id = quarantined(funcstack_services, fresh)
    assert until(operators, "GET", "outbox/status", lambda r: r.status == 200).status == 200
    assert funcstack_services.cosmos is not None
    with frozen(funcstack_services.cosmos.started().pid):
        replies = at_once(
            operators,
            [
                ("GET", "outbox/status", None),
                ("GET", "outbox/quarantine", None),
                ("GET", "health", None),
                ("POST", f"outbox/quarantine/{event_id}/replay", None),
                ("DELETE", f"outbox/quarantine/{event_id}?reason=gone", None),
                ("POST", "outbox/redrive", {"since": "2000-01-01T00:00:00Z"}),
            ],
        )
    for reply, took in replies:
        unavailable(reply, took)
    assert until(operators, "GET", "health", lambda r: r.status == 200).status == 200


def test_replay_and_redrive_answer_503_within_the_bound_when_the_broker_hangs(
    funcstack_services: LocalStack, operators: HostedApp, fresh: str
) -> None:
    event_id = quarantined(funcstack_services, fresh)
    replay = f"outbox/quarantine/{event_id}/replay"
    assert funcstack_services.servicebus is not None
    with frozen(funcstack_services.servicebus.started().pid):
        replies = at_once(
            operators,
            [("POST", replay, None), ("POST", "outbox/redrive", {"since": "2000-01-01T00:00:00Z"})],
        )
    for reply, took in replies:
        unavailable(reply, took)
    # the broker back: the replay goes out (one that finished meanwhile resolved it)
    reply = until(
        operators, "POST", replay, lambda r: r.status == 202 and r.json()["status"] == "resolved"
    )
    assert reply.status == 202, reply.body
    assert reply.json()["status"] == "resolved"


def test_the_operators_routes_take_the_master_key_only(
    funcstack_app: Callable[..., HostedApp], fresh: str
) -> None:
    """The operators' `/outbox/...` are admin: the master key only, as the README's table says
    (moved from examples/orders' end-to-end test: the operators' routes are this package's)."""
    app = funcstack_app(OPERATORS_APP, settings={"COSMOS_CONTAINER": fresh})  # keys enforced
    assert app.function_key is not None and app.master_key is not None
    function_key = {"x-functions-key": app.function_key}
    master_key = {"x-functions-key": app.master_key}
    assert call_keyed(app, "outbox/status") == 401
    assert call_keyed(app, "outbox/status", function_key) == 401
    deadline = time.monotonic() + SHORT
    while (status := call_keyed(app, "outbox/status", master_key)) == 503:
        if time.monotonic() > deadline:
            break
        time.sleep(1)
    assert status == 200


def call_keyed(app: HostedApp, path: str, headers: dict[str, str] | None = None) -> int:
    """The status of a GET of `path` with `headers` (a key)."""
    url = urlsplit(f"{app.url}/{path}")
    connection = http.client.HTTPConnection(url.netloc, timeout=scaled(BOUND_SECONDS + 20))
    try:
        connection.request("GET", url.path, headers=headers or {})
        return connection.getresponse().status
    finally:
        connection.close()
