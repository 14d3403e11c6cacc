"""The app in a local Functions host (the real Python worker) on the local stack, with the
resources of its funcstack.json, through funcstack's pytest plugin and with keys enforced as in
Azure: a borrow through `func.AsgiFunctionApp`'s catch-all function, its retry with the same
Idempotency-Key after the quota is full (the first answer), the timer marking the loan overdue
with its own query on Cosmos DB, and every event on the topic once, in order, read with the
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
    reason="the local stack tool is not installed (pip install funcstack, from "
    "its wheel until it is on PyPI): the end-to-end test needs it",
)

from azure.servicebus import ServiceBusClient, ServiceBusReceivedMessage

from funcstack.deadlines import SHORT, scaled, wait_for

pytestmark = pytest.mark.e2e
APP = Path(__file__).resolve().parents[1]
#: How long `receive` listens for messages that must not come, after those it waited for (a
#: duplicate): a check of a non-event, longer on a slower machine (TEST_DEADLINE_SCALE).
NOTHING_MORE = scaled(3.0)


def call(
    method: str, url: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    sent = {**({"content-type": "application/json"} if data is not None else {}), **(headers or {})}
    request = urllib.request.Request(url, data=data, method=method, headers=sent)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=SHORT) as response:  # noqa: S310 (local)
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        raw = error.read()
        return error.code, json.loads(raw) if raw else None


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
            "loan-events", "loan-notices", session_id=session, max_wait_time=NOTHING_MORE
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


def test_a_borrow_its_retry_and_the_overdue_timer_reach_the_topic_once_in_order(
    funcstack_services: Any,
    funcstack_app: Callable[..., Any],
) -> None:
    # a quota of 1, loans due at once, the timer every 2 seconds
    app = funcstack_app(
        APP,
        settings={
            "FEED_POLL_DELAY_MS": "100",
            "LOAN_LIMIT": "1",
            "LOAN_DAYS": "0",
            "OVERDUE_SCHEDULE": "*/2 * * * * *",
        },
    )
    key = {"x-functions-key": app.function_key}
    loans = f"{app.url}/api/members/ada/loans"
    assert call("POST", loans, {"bookId": "dune"})[0] == 401
    first = call("POST", loans, {"bookId": "dune"}, {**key, "Idempotency-Key": "borrow-1"})
    assert first[0] == 201, first
    again = call("POST", loans, {"bookId": "dune"}, {**key, "Idempotency-Key": "borrow-1"})
    assert again == first  # the quota is full now: the key is looked up first
    assert call("POST", loans, {"bookId": "emma"}, key)[0] == 409
    wait_for(
        lambda: call("GET", loans, headers=key)[1][0]["status"] == "overdue",
        "the timer marking the loan overdue",
        every=0.5,
    )

    received = receive(funcstack_services.servicebus_connection_string, "ada", 2)
    assert [(m.subject, (m.application_properties or {})[b"version"]) for m in received] == [
        ("BookBorrowed", 1),
        ("LoanOverdue", 2),
    ]
    assert {json.loads(b"".join(m.body))["loanId"] for m in received} == {first[1]["id"]}
