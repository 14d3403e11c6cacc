"""Errors name the dependency, and a read made of parts shows what it could read (issue 66, item
3): a 503 said "the store or the message broker" without saying which, and the journey failed
whole when only Service Bus was down."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import body, problem
from recovery_world import SUBSCRIPTION, RecoveryWorld

from cosmos_outbox.ports import LeaseBacklog


@pytest.fixture
def world() -> Iterator[RecoveryWorld]:
    yield from RecoveryWorld.running()


@pytest.fixture
def bound_04() -> Iterator[RecoveryWorld]:
    """The world with its routes' bound 0.4 s (the outbox's: `Outbox(bound_seconds=...)`)."""
    yield from RecoveryWorld.running(bound_seconds=0.4)


@pytest.fixture
def bound_12() -> Iterator[RecoveryWorld]:
    yield from RecoveryWorld.running(bound_seconds=1.2)


def test_with_service_bus_down_the_journey_shows_what_cosmos_db_holds_and_names_the_rest(
    world: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = world.publish("w1", "StockAdded")
    world.relay()
    world.deliver_new()
    world.memory.backlog.leases = [LeaseBacklog("0", 0, None, pending_ids_complete=True)]

    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("Service Bus unreachable: connection refused")

    monkeypatch.setattr(world.memory.dead_letters, "peek", unreachable)
    journey = body(world.call("GET", f"outbox/journey/events/{ids[0]}"))
    assert (journey["stored"], journey["relay"]) == (True, "relayed")
    sight = next(s for s in journey["subscribers"] if s["subscription"] == SUBSCRIPTION)
    assert sight["state"] == "applied"  # its subscriber's container answered
    missing = [(u["dependency"], u["part"]) for u in journey["unanswered"]]
    assert ("Service Bus", f"the dead letters at {SUBSCRIPTION}") in missing
    aggregate = body(world.call("GET", "outbox/journey/aggregates/warehouse/w1"))
    assert [e["eventId"] for e in aggregate["events"]] == ids
    assert any(u["dependency"] == "Service Bus" for u in aggregate["unanswered"])


def test_a_hung_broker_is_named_in_the_503(
    bound_04: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = bound_04

    def hangs(*args: Any, **kwargs: Any) -> Any:
        time.sleep(2)
        raise ConnectionError("gave up")

    monkeypatch.setattr(world.memory.dead_letters, "peek", hangs)
    refused = problem(world.call("GET", f"outbox/deadletters/{SUBSCRIPTION}"), 503)
    assert refused["detail"].startswith("Service Bus did not answer within")
    assert "the store or the message broker" not in refused["detail"]


def test_a_hung_broker_is_named_in_the_async_outboxs_503_even_when_it_hangs_on_cancel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found walking the console with Service Bus frozen (SIGSTOP, the browser test's stale
    panel): the async outbox answered "the store or the message broker did not answer", since
    its bounded wait waited on for the cancelled call to end -- and the SDK, cancelled, closes
    its links with a peer that does not answer. The wait gives up at its bound, naming it."""
    import asyncio

    from cosmos_outbox.aio import Outbox as AsyncOutbox
    from cosmos_outbox_operators import Operators
    from cosmos_outbox_testing import FunctionClient, in_memory

    memory = in_memory(subscriptions={SUBSCRIPTION: None})
    outbox = AsyncOutbox(services=lambda: memory.services, bound_seconds=0.4)
    app = outbox.function_app(Operators(), title="t")

    async def frozen(*args: Any, **kwargs: Any) -> Any:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            await asyncio.sleep(1.5)  # closing a link: the frozen peer never answers the detach
            raise

    monkeypatch.setattr(memory.dead_letters, "peek", frozen)
    client = FunctionClient(app)
    try:
        started = time.monotonic()
        refused = problem(client.request("GET", f"outbox/deadletters/{SUBSCRIPTION}"), 503)
    finally:
        client.close()
    assert refused["detail"].startswith("Service Bus did not answer within"), refused["detail"]
    assert time.monotonic() - started < 1.2


def test_a_redrive_whose_broker_hangs_is_a_503_naming_service_bus_within_the_bound(
    bound_12: RecoveryWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The re-drive's own wait on Service Bus (0.9 of the bound) fires before the bound's: its
    DependencyUnavailableError was wrapped as "re-drive failed to send:
    DependencyUnavailableError", a 503 that named neither Service Bus nor the wait
    (test_operators_bounded's frozen broker met it about 1 run in 2)."""
    world = bound_12
    world.publish("w1", "StockAdded")

    def hangs(*args: Any, **kwargs: Any) -> Any:
        time.sleep(3)
        raise ConnectionError("gave up")

    monkeypatch.setattr(world.memory.publisher, "send", hangs)
    refused = problem(
        world.call("POST", "outbox/redrive", body={"since": "2000-01-01T00:00:00Z"}), 503
    )
    assert refused["detail"].startswith("Service Bus did not answer within"), refused["detail"]
