"""The subscriber's projection fed through cosmos-outbox's dispatch and projector, on in-memory
stores, through both of its APIs: the sync `Dispatcher` / `Projector` and the async ones
(`cosmos_outbox.aio`, which the app runs). Each message is built as the relay sends it; each
test runs on both, and both leave the same documents: events applied once and in version order,
duplicates acknowledged without effect, a gap held and closed, a known gap recorded, actions it
does not handle taken as version steps, events of another aggregate type skipped, claim-check
payloads fetched, and what is not an outbox event (or a payload that cannot be fetched) raised
for the host to abandon and dead-letter. Also the app's own trigger function, in-process."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

import azure.functions as func
import pytest

import tests.subscriber  # noqa: F401  (puts subscriber/ on sys.path)
from cosmos_outbox.documents import read_feed
from cosmos_outbox.errors import PayloadNotFoundError
from cosmos_outbox.relay import (
    OutboxMessage,
    OutboxRecord,
    claim_check,
    quarantine_notice,
    to_message,
)
from cosmos_outbox.servicebus import to_servicebus_message
from cosmos_outbox.subscriber import (
    GAP_TYPE,
    HELD_TYPE,
    INBOX_TYPE,
    Dispatcher,
    Outcome,
    Projector,
    Result,
    UnreadableEventError,
    aio,
)
from cosmos_outbox_testing import (
    FunctionClient,
    InMemoryPayloadStore,
    InMemoryStore,
    as_async,
    service_bus_message,
)
from tests.subscriber.test_http import TOKENS

from contacts_projection.bootstrap import CONTACT, Services, bootstrap  # isort: skip
from contacts_projection.projection import IGNORED_ACTIONS, ContactProjection  # isort: skip
from contacts_projection.reads import StoreProjectionReads  # isort: skip


def record(
    contact: str, version: int, action: str, *, aggregate_type: str = CONTACT, **fields: Any
) -> OutboxRecord:
    """An event of `contact` as the relay reads it from the outbox's container."""
    event_id = f"{contact}-{version}-{action}"
    [item] = read_feed(
        [
            {
                "id": event_id,
                "partitionKey": contact,
                "type": "domainEvent",
                "aggregateType": aggregate_type,
                "source": f"/{aggregate_type}s",
                "data": {
                    "id": event_id,
                    f"{aggregate_type}Id": contact,
                    "version": version,
                    "action": action,
                    "createdAt": "2026-11-22T08:00:00Z",
                    **fields,
                },
            }
        ]
    )
    assert isinstance(item, OutboxRecord)
    return item


def delivered(
    message: OutboxMessage, *, delivery: int = 1, drop: tuple[str, ...] = ()
) -> func.ServiceBusMessage:
    """`message` as the trigger hands it over (its application properties in `drop` left out:
    a message from before the outbox set them)."""
    sent = to_servicebus_message(message)
    properties = {
        str(k): v for k, v in (sent.application_properties or {}).items() if str(k) not in drop
    }
    return service_bus_message(
        b"".join(sent.body) if message.body else b"",
        message_id=message.message_id,
        session_id=message.session_id,
        content_type=sent.content_type,
        application_properties=properties,
        delivery_count=delivery,
    )


def event(
    contact: str,
    version: int,
    action: str = "ContactEmailUpdatedEvent",
    *,
    delivery: int = 1,
    **fields: Any,
) -> func.ServiceBusMessage:
    if action == "ContactEmailUpdatedEvent" and not fields:
        fields = {"email": f"v{version}@example.com"}
    return delivered(to_message(record(contact, version, action, **fields)), delivery=delivery)


def created(contact: str, *, delivery: int = 1) -> func.ServiceBusMessage:
    return event(
        contact,
        1,
        "ContactCreatedEvent",
        delivery=delivery,
        name={"firstName": "Ada", "lastName": "L"},
        email="ada@example.com",
        description="d",
        company={"companyName": "C"},
    )


@dataclass
class Side:
    """The dispatch and the projector of one API on one in-memory store: `handle` delivers a
    message (and runs the async API's coroutine on an event loop of the test's own)."""

    name: str
    store: InMemoryStore
    payloads: InMemoryPayloadStore
    handle: Callable[[func.ServiceBusMessage], Result | None]

    def projection(self, contact: str) -> dict[str, Any] | None:
        return self.store.read(contact, contact)

    def of_type(self, contact: str, type_: str) -> list[dict[str, Any]]:
        return [d for d in self.store.in_partition(contact) if d.get("type") == type_]


@pytest.fixture(params=["sync", "async"])
def side(request: pytest.FixtureRequest) -> Iterator[Side]:
    store, payloads = InMemoryStore(), InMemoryPayloadStore()
    options: dict[str, Any] = {
        "ignored_actions": IGNORED_ACTIONS,
        "default_aggregate_type": CONTACT,
        "payloads": lambda: payloads,
    }
    if request.param == "sync":
        projector = Projector(store, ContactProjection(), inbox_ttl_seconds=3600)
        dispatcher = Dispatcher(CONTACT, lambda: projector, **options)
        yield Side("sync", store, payloads, dispatcher.handle)
        return
    aprojector = aio.Projector(store, ContactProjection(), inbox_ttl_seconds=3600)
    adispatcher = aio.Dispatcher(CONTACT, lambda: aprojector, **options)
    with asyncio.Runner() as runner:

        def run[T](coroutine: Coroutine[Any, Any, T]) -> T:
            return runner.run(coroutine)

        yield Side("async", store, payloads, lambda m: run(adispatcher.handle(m)))


def outcome(result: Result | None) -> tuple[Outcome, list[int]] | None:
    return None if result is None else (result.outcome, result.applied)


def test_events_in_order_are_applied_once_each_with_an_inbox_record(side: Side) -> None:
    assert outcome(side.handle(created("c1"))) == (Outcome.APPLIED, [1])
    assert outcome(side.handle(event("c1", 2))) == (Outcome.APPLIED, [2])
    projection = side.projection("c1")
    assert projection is not None
    assert (projection["version"], projection["data"]["email"], projection["deleted"]) == (
        2,
        "v2@example.com",
        False,
    )
    assert projection["lastEventId"] == "c1-2-ContactEmailUpdatedEvent"
    assert sorted(r["version"] for r in side.of_type("c1", INBOX_TYPE)) == [1, 2]
    assert {r["ttl"] for r in side.of_type("c1", INBOX_TYPE)} == {3600}


def test_a_redelivered_event_is_acknowledged_without_effect(side: Side) -> None:
    side.handle(created("c1"))
    side.handle(event("c1", 2))
    before = side.projection("c1")
    assert outcome(side.handle(event("c1", 2, delivery=2))) == (Outcome.DUPLICATE, [])
    assert outcome(side.handle(created("c1"))) == (Outcome.DUPLICATE, [])
    assert side.projection("c1") == before


def test_an_event_after_a_gap_is_held_until_the_missing_one_arrives(side: Side) -> None:
    side.handle(created("c1"))
    held = side.handle(event("c1", 3))
    assert held is not None and (held.outcome, held.missing) == (Outcome.HELD, 2)
    assert outcome(
        side.handle(event("c1", 4, "ContactDeletedEvent", deletedAt="2026-11-22T09:00:00Z"))
    ) == (Outcome.HELD, [])
    assert [d["missingVersion"] for d in side.of_type("c1", HELD_TYPE)] == [2, 2]
    assert (side.projection("c1") or {})["version"] == 1
    assert outcome(side.handle(event("c1", 2))) == (Outcome.APPLIED, [2, 3, 4])
    projection = side.projection("c1")
    assert projection is not None and (projection["version"], projection["deleted"]) == (4, True)
    assert side.of_type("c1", HELD_TYPE) == []


def test_a_quarantine_notice_records_a_known_gap_that_the_replay_closes(side: Side) -> None:
    side.handle(created("c1"))
    quarantined = record("c1", 2, "ContactEmailUpdatedEvent", email="late@example.com")
    notice = quarantine_notice(quarantined, "message of 300000 bytes is too large")
    assert notice is not None
    assert outcome(side.handle(delivered(notice))) == (Outcome.GAP_RECORDED, [])
    [gap] = side.of_type("c1", GAP_TYPE)
    assert (gap["version"], gap["eventId"]) == (2, quarantined.event_id)
    assert outcome(side.handle(event("c1", 3))) == (Outcome.HELD, [])
    # the operator replays the quarantined event
    assert outcome(side.handle(delivered(to_message(quarantined)))) == (Outcome.APPLIED, [2, 3])
    assert side.of_type("c1", GAP_TYPE) == side.of_type("c1", HELD_TYPE) == []


def test_an_action_it_does_not_handle_is_a_version_step_logged_with_its_fields(
    side: Side,
    caplog: pytest.LogCaptureFixture,
) -> None:
    side.handle(created("c1"))
    with caplog.at_level(logging.INFO, logger="cosmos_outbox.subscriber"):
        result = side.handle(event("c1", 2, "ContactNicknameChangedEvent", nickname="Ada"))
    assert outcome(result) == (Outcome.IGNORED, [2])
    [line] = [r for r in caplog.records if getattr(r, "outcome", None) == "ignored"]
    assert line.levelno == logging.WARNING
    assert {
        k: getattr(line, k)
        for k in (
            "eventId",
            "aggregateType",
            "contactId",
            "action",
            "version",
            "deliveryCount",
            "reason",
        )
    } == {
        "eventId": "c1-2-ContactNicknameChangedEvent",
        "aggregateType": "contact",
        "contactId": "c1",
        "action": "ContactNicknameChangedEvent",
        "version": 2,
        "deliveryCount": 1,
        "reason": "unknown action",
    }
    assert outcome(side.handle(event("c1", 3))) == (Outcome.APPLIED, [3])
    assert "nickname" not in (side.projection("c1") or {})["data"]


def test_each_delivery_is_logged_with_its_outcome_and_delivery_count(
    side: Side,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="cosmos_outbox.subscriber"):
        side.handle(created("c1"))
        side.handle(created("c1", delivery=3))
    lines = [
        (r.getMessage(), r.outcome, r.deliveryCount)  # type: ignore[attr-defined]
        for r in caplog.records
        if hasattr(r, "outcome")
    ]
    assert lines == [
        (
            "event c1-1-ContactCreatedEvent (contact c1, version 1, delivery 1): applied",
            "applied",
            1,
        ),
        (
            "event c1-1-ContactCreatedEvent (contact c1, version 1, delivery 3): duplicate",
            "duplicate",
            3,
        ),
    ]


def test_an_event_of_another_aggregate_type_is_skipped(side: Side) -> None:
    ticket = delivered(to_message(record("t1", 1, "TicketOpenedEvent", aggregate_type="ticket")))
    assert side.handle(ticket) is None
    assert side.store.in_partition("t1") == []


def test_a_message_without_the_aggregate_type_property_is_a_contact_event(side: Side) -> None:
    old = delivered(
        to_message(
            record("c1", 1, "ContactCreatedEvent", name={}, email="x", description="d", company={})
        ),
        drop=("aggregateType",),
    )
    assert outcome(side.handle(old)) == (Outcome.APPLIED, [1])


def test_a_message_that_is_not_an_outbox_event_raises(side: Side) -> None:
    with pytest.raises(UnreadableEventError):
        side.handle(service_bus_message({"hello": "world"}))
    assert side.store.documents == {}


def test_a_claim_check_payload_is_fetched_and_a_missing_one_raises(
    side: Side,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = to_message(
        record(
            "c1",
            1,
            "ContactCreatedEvent",
            name={},
            email="x@example.com",
            description="d" * 1000,
            company={},
        )
    )
    reference = side.payloads.reference("c1-1")
    side.payloads.put("c1-1", first.body, content_type=first.content_type)
    assert outcome(side.handle(delivered(claim_check(first, reference)))) == (Outcome.APPLIED, [1])
    assert (side.projection("c1") or {})["data"]["description"] == "d" * 1000

    second = to_message(record("c1", 2, "ContactEmailUpdatedEvent", email="y@example.com"))
    missing = delivered(claim_check(second, side.payloads.reference("c1-2")), delivery=4)
    with (
        caplog.at_level(logging.ERROR, logger="cosmos_outbox.subscriber"),
        pytest.raises(PayloadNotFoundError),
    ):
        side.handle(missing)
    [line] = caplog.records
    assert (line.outcome, line.deliveryCount, line.dataref) == (  # type: ignore[attr-defined]
        "payload-unavailable",
        4,
        side.payloads.reference("c1-2"),
    )
    assert (side.projection("c1") or {})["version"] == 1


def test_the_app_projects_through_its_async_trigger_and_reads_it_over_http() -> None:
    store = InMemoryStore()
    services = Services(
        projector=aio.Projector(store, ContactProjection(), inbox_ttl_seconds=3600),
        reads=StoreProjectionReads(as_async(store)),
        tokens=TOKENS,
    )
    with FunctionClient(bootstrap(lambda: services)) as client:
        for message in (created("c1"), event("c1", 3), event("c1", 2), created("c2")):
            assert client.invoke("project_contact_events", message) is None
        read = client.request("GET", "projections/contacts/c1")
        assert read.status_code == 200, read.get_body()
        assert json.loads(read.get_body()) == {
            "id": "c1",
            "version": 3,
            "lastEventId": "c1-3-ContactEmailUpdatedEvent",
            "deleted": False,
            "data": {
                "name": {"firstName": "Ada", "lastName": "L"},
                "email": "v3@example.com",
                "description": "d",
                "company": {"companyName": "C"},
            },
        }
        seen: list[str] = []
        headers: dict[str, str] = {}
        while True:
            page = client.request(
                "GET", "projections/contacts", params={"pageSize": "1"}, headers=headers
            )
            assert page.status_code == 200, page.get_body()
            body = json.loads(page.get_body())
            seen += [item["id"] for item in body["items"]]
            if not body["hasMore"]:
                break
            headers = {"x-continuation-token": body["continuationToken"]}
    assert sorted(seen) == ["c1", "c2"]  # projections only: no inbox or held documents
