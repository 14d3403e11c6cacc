"""The app in a local Functions host (the real Python worker) on the local stack, with the
resources of its funcstack.json, through funcstack's pytest plugin, with keys enforced as in
Azure: its three routes answer as its README says to a client that sends the function key
(`x-functions-key`), and 401 to one that does not; the operators' routes take only the master
key; its events reach its topic with `aggregateType=order`, in order, once, received with the
unmodified Service Bus SDK."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "funcstack",
    reason="the local stack tool is not installed (pip install "
    "<repo>/packages/funcstack): the end-to-end test needs it",
)

from azure.servicebus import ServiceBusClient, ServiceBusReceivedMessage

from funcstack.deadlines import SHORT, scaled

pytestmark = pytest.mark.e2e
APP = Path(__file__).resolve().parents[1]
#: How long `receive` listens for messages that must not come, after those it waited for (a
#: duplicate): a check of a non-event, longer on a slower machine (TEST_DEADLINE_SCALE).
NOTHING_MORE = scaled(3.0)


def call(
    method: str, url: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], Any]:
    data = None if body is None else json.dumps(body).encode()
    sent = {**({"content-type": "application/json"} if data is not None else {}), **(headers or {})}
    request = urllib.request.Request(url, data=data, method=method, headers=sent)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=SHORT) as response:  # noqa: S310 (local)
            raw = response.read()
            headers = {k.lower(): v for k, v in response.headers.items()}
            return response.status, headers, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        raw = error.read()
        headers = {k.lower(): v for k, v in error.headers.items()}
        return error.code, headers, json.loads(raw) if raw else None


def receive(
    connection: str, session: str, count: int, wait: float = SHORT
) -> list[ServiceBusReceivedMessage]:
    """`count` messages of one session of the app's subscription (by `wait`, a deadline), then
    NOTHING_MORE for any extra."""
    received: list[ServiceBusReceivedMessage] = []
    deadline = time.monotonic() + wait
    with (
        ServiceBusClient.from_connection_string(connection) as client,
        client.get_subscription_receiver(
            "order-events", "order-audit", session_id=session, max_wait_time=NOTHING_MORE
        ) as receiver,
    ):
        while time.monotonic() < deadline:
            batch = receiver.receive_messages(max_message_count=10, max_wait_time=NOTHING_MORE)
            for message in batch:
                receiver.complete_message(message)
            received += batch
            if len(received) >= count and not batch:
                break
    return received


def properties_of(message: ServiceBusReceivedMessage) -> dict[str, Any]:
    def text(value: Any) -> Any:
        return value.decode() if isinstance(value, bytes) else value

    return {text(k): text(v) for k, v in (message.application_properties or {}).items()}


def test_the_routes_answer_and_the_events_reach_the_topic_once_in_order(
    funcstack_services: Any,
    funcstack_app: Callable[..., Any],
) -> None:
    app = funcstack_app(APP, settings={"FEED_POLL_DELAY_MS": "100"})
    key = {"x-functions-key": app.function_key}  # as a client in Azure sends it
    status, headers, order = call(
        "POST", f"{app.url}/orders", {"customerName": "Ada", "totalCents": 1250}, key
    )
    assert status == 201, order
    assert headers["location"] == f"/api/orders/{order['id']}"
    etag = headers["etag"]
    status, headers, read = call("GET", f"{app.url}/orders/{order['id']}", headers=key)
    assert (status, headers["etag"], read["status"]) == (200, etag, "placed")
    status, _, _ = call(
        "POST", f"{app.url}/orders/{order['id']}/cancel", headers={**key, "If-Match": '"stale"'}
    )
    assert status == 412
    status, _, cancelled = call(
        "POST", f"{app.url}/orders/{order['id']}/cancel", headers={**key, "If-Match": etag}
    )
    assert (status, cancelled["status"]) == (200, "cancelled")
    status, headers, _ = call("POST", f"{app.url}/orders/{order['id']}/cancel", headers=key)
    assert status == 409 and headers["content-type"].startswith("application/problem+json")

    received = receive(funcstack_services.servicebus_connection_string, order["id"], 2)
    assert [(m.subject, properties_of(m)["version"]) for m in received] == [
        ("OrderPlaced", 1),
        ("OrderCancelled", 2),
    ]
    for message in received:
        properties = properties_of(message)
        body = json.loads(b"".join(message.body))  # the event's own fields, nothing added
        assert properties["aggregateType"] == "order"
        assert properties["orderId"] == message.session_id == order["id"]
        assert properties["cloudEvents_source"] == "/orders"
        assert "orderId" not in body and "version" not in body


def test_each_route_takes_the_keys_of_its_auth_level(funcstack_app: Callable[..., Any]) -> None:
    """The business routes are `function` level, `/health` and `/openapi.json` anonymous, as the
    README's table says (the operators' `/outbox/...`, admin, are cosmos-outbox-operators': its
    hosted tests hold them to the master key)."""
    app = funcstack_app(APP)  # keys required by auth level, as in Azure
    order = {"customerName": "Ada", "totalCents": 1}
    assert call("POST", f"{app.url}/orders", order)[0] == 401
    assert call("GET", f"{app.url}/orders/unknown")[0] == 401
    assert call("POST", f"{app.url}/orders?code={app.function_key}", order)[0] == 201
    assert call("GET", f"{app.url}/health")[0] == 200
    assert call("GET", f"{app.url}/openapi.json")[0] == 200
