"""The app in a local Functions host (the real Python worker) on the local stack, with the
resources of its funcstack.json, through funcstack's pytest plugin and with keys enforced as in
Azure: the FastAPI app answers through `func.AsgiFunctionApp`'s catch-all function, a refund
command goes through the session-enabled command queue, and every event reaches the topic once,
in order, read with the unmodified Service Bus SDK."""

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

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceivedMessage

from funcstack.deadlines import SHORT, scaled, wait_for

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
            answer = {k.lower(): v for k, v in response.headers.items()}
            return response.status, answer, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        raw = error.read()
        answer = {k.lower(): v for k, v in error.headers.items()}
        return error.code, answer, json.loads(raw) if raw else None


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
            "concert-events", "concert-audit", session_id=session, max_wait_time=NOTHING_MORE
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


def test_tickets_sold_and_refunded_reach_the_topic_once_in_order(
    funcstack_services: Any,
    funcstack_app: Callable[..., Any],
) -> None:
    app = funcstack_app(APP, settings={"FEED_POLL_DELAY_MS": "100"})
    key = {"x-functions-key": app.function_key}
    assert call("POST", f"{app.url}/api/concerts", {"name": "Ada", "capacity": 3})[0] == 401
    status, headers, concert = call(
        "POST", f"{app.url}/api/concerts", {"name": "Ada live", "capacity": 3}, key
    )
    assert status == 201 and headers["content-type"] == "application/json", concert
    status, _, ticket = call(
        "POST",
        f"{app.url}/api/concerts/{concert['id']}/tickets",
        {"buyer": "Grace", "quantity": 2},
        key,
    )
    assert status == 201, ticket
    assert (
        call(
            "POST",
            f"{app.url}/api/concerts/{concert['id']}/tickets",
            {"buyer": "Alan", "quantity": 2},
            key,
        )[0]
        == 409
    )  # sold out
    with (
        ServiceBusClient.from_connection_string(
            funcstack_services.servicebus_connection_string
        ) as client,
        client.get_queue_sender("concert-commands") as sender,
    ):
        sender.send_messages(
            ServiceBusMessage(
                json.dumps(
                    {"type": "RefundTicket", "concertId": concert["id"], "ticketId": ticket["id"]}
                ),
                session_id=concert["id"],
            )
        )
    ticket_url = f"{app.url}/api/concerts/{concert['id']}/tickets/{ticket['id']}"
    wait_for(
        lambda: call("GET", ticket_url, headers=key)[2]["status"] == "refunded",
        "the refund command handled (the ticket refunded)",
        every=0.25,
    )
    assert call("GET", f"{app.url}/api/concerts/{concert['id']}", headers=key)[2]["sold"] == 0

    received = receive(funcstack_services.servicebus_connection_string, concert["id"], 3)
    assert [(m.subject, (m.application_properties or {})[b"version"]) for m in received] == [
        ("ConcertAnnounced", 1),
        ("TicketsSold", 2),
        ("TicketRefunded", 3),
    ]
    for message in received:
        properties = message.application_properties or {}
        assert properties[b"aggregateType"] == b"concert"
        assert properties[b"concertId"] == concert["id"].encode()
        assert message.session_id == concert["id"]
        # the body is what the app published, nothing added (the envelope is in properties)
        assert "concertId" not in json.loads(b"".join(message.body))
