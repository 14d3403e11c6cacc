"""The operators' routes and /health through the local Functions host when the store or the
broker hangs (its process stopped): each answers 503 with Retry-After within the bound
(`cosmos_outbox.http.bounded.BOUND_SECONDS`), never a 500 nor the SDKs' own waits; and
answers again once the endpoint is back. A stack of its own: its endpoints are frozen."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cosmos_outbox import telemetry
from cosmos_outbox.cosmos import CosmosDocumentStore
from cosmos_outbox.documents import EVENT_TYPE, read_feed
from cosmos_outbox.http.bounded import BOUND_RETRY_AFTER_SECONDS, BOUND_SECONDS
from cosmos_outbox.relay import Quarantine
from cosmos_outbox.testing import run_sync
from entrypoints.bootstrap import LEGACY_EVENTS
from tests.contacts.faults import frozen
from tools.httpclient import Client
from tools.stack import Ports, Stack
from tools.status import Context, Summary, api_status, render

pytestmark = pytest.mark.integration

ADA = {
    "firstName": "Ada",
    "lastName": "Bound",
    "email": "bound@example.com",
    "companyName": "Engines",
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Stack(
        workdir=Path(tmp_path_factory.mktemp("bounded")),
        ports=Ports.free(),
        settings_overrides={"FEED_POLL_DELAY_MS": "100"},
    ) as s:
        yield s


@pytest.fixture
def client(stack: Stack) -> Iterator[Client]:
    c = Client(stack.api_url, timeout=BOUND_SECONDS + 20)
    try:
        yield c
    finally:
        c.close()


def unavailable(reply: Any) -> None:
    assert reply.status == 503, reply.body
    assert (reply.header("content-type") or "").startswith("application/problem+json")
    assert reply.header("retry-after") == str(BOUND_RETRY_AFTER_SECONDS)
    assert f"did not answer within {BOUND_SECONDS:g} s" in reply.json()["detail"]


def until_ok(client: Client, path: str) -> Any:
    """The route answers 200 again once the endpoint is back (condition, not a duration)."""
    deadline = time.monotonic() + 60
    while True:
        reply = client.request("GET", path)
        if reply.status == 200 or time.monotonic() > deadline:
            return reply
        time.sleep(0.5)


def quarantined(stack: Stack, client: Client) -> str:
    """A contact's first event, put in the quarantine as the relay would: its event id."""
    created = client.request("POST", "/contacts", json_body=ADA)
    assert created.status == 201, created.body
    container = stack.contacts_container()
    [document] = container.query_items(
        "SELECT * FROM c WHERE c.type = @t",
        parameters=[{"name": "@t", "value": EVENT_TYPE}],
        partition_key=created.json()["id"],
    )
    [event] = read_feed([document], legacy=LEGACY_EVENTS)
    quarantine = Quarantine(CosmosDocumentStore(container), legacy=LEGACY_EVENTS)
    run_sync(quarantine.put(event, reason="set aside by the test"))  # type: ignore[arg-type]
    return str(document["id"])


def test_status_lists_and_health_answer_503_when_the_store_hangs(
    stack: Stack, client: Client
) -> None:
    assert stack.cosmos is not None
    assert until_ok(client, "/outbox/status").status == 200
    with frozen(stack.cosmos.process):
        for path in ("/outbox/status", "/outbox/quarantine", "/health"):
            unavailable(client.request("GET", path))
    assert until_ok(client, "/outbox/status").status == 200


def test_replay_discard_and_redrive_answer_503_when_the_store_hangs(
    stack: Stack, client: Client
) -> None:
    assert stack.cosmos is not None
    event_id = quarantined(stack, client)
    with frozen(stack.cosmos.process):
        unavailable(client.request("POST", f"/outbox/quarantine/{event_id}/replay"))
        unavailable(client.request("DELETE", f"/outbox/quarantine/{event_id}?reason=gone"))
        unavailable(
            client.request("POST", "/outbox/redrive", json_body={"since": "2000-01-01T00:00:00Z"})
        )
    assert until_ok(client, "/health").status == 200


def test_replay_and_redrive_answer_503_when_the_broker_hangs(stack: Stack, client: Client) -> None:
    assert stack.servicebus is not None
    event_id = quarantined(stack, client)
    with frozen(stack.servicebus.process):
        unavailable(client.request("POST", f"/outbox/quarantine/{event_id}/replay"))
        unavailable(
            client.request("POST", "/outbox/redrive", json_body={"since": "2000-01-01T00:00:00Z"})
        )
    # the broker back: the replay goes out (a replay that finished meanwhile resolved it)
    deadline = time.monotonic() + 60
    while True:
        reply = client.request("POST", f"/outbox/quarantine/{event_id}/replay")
        if (
            reply.status == 202 and reply.json()["status"] == "resolved"
        ) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert reply.status == 202, reply.body
    assert reply.json()["status"] == "resolved"


def test_make_status_shows_the_records_quarantined_now_from_the_api(
    stack: Stack, client: Client
) -> None:
    quarantined(stack, client)
    listed = client.request("GET", "/outbox/quarantine?pageSize=100").json()["items"]
    now = sum(1 for item in listed if item["status"] == "quarantined")
    body, error = api_status(stack.api_url)
    assert error is None and body is not None
    assert body["quarantined"] == now >= 1
    screen = render(Summary(sums={telemetry.QUARANTINED: 99.0}), context=Context(api=body))
    assert f"quarantined events now     {now}  (records not resolved, now, from the API)" in screen
    assert "quarantine actions         99  " in screen
