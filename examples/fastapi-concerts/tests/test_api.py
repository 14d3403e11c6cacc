"""The HTTP API, through the app's ASGI function on in-memory services: each change and its
event are one batch; tickets are never oversold; a retried purchase with its Idempotency-Key
buys once; the relay sends the events in order per concert."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from conftest import World


def announced(world: World, capacity: int = 10) -> str:
    status, concert = world.call("POST", "concerts", {"name": "Ada live", "capacity": capacity})
    assert status == 201, concert
    return str(concert["id"])


def test_a_concert_is_announced_with_its_event(world: World) -> None:
    concert_id = announced(world)
    assert world.call("GET", f"concerts/{concert_id}") == (
        200,
        {"id": concert_id, "name": "Ada live", "capacity": 10, "sold": 0},
    )
    [event] = world.events()
    assert (event["action"], event["concertId"], event["version"], event["capacity"]) == (
        "ConcertAnnounced",
        concert_id,
        1,
        10,
    )


def test_buying_tickets_writes_the_ticket_the_count_and_the_event_together(
    world: World,
) -> None:
    concert_id = announced(world, capacity=3)
    status, ticket = world.call(
        "POST", f"concerts/{concert_id}/tickets", {"buyer": "Grace", "quantity": 2}
    )
    assert status == 201 and ticket["status"] == "sold"
    assert world.call("GET", f"concerts/{concert_id}/tickets/{ticket['id']}") == (200, ticket)
    assert world.call("GET", f"concerts/{concert_id}")[1]["sold"] == 2
    assert (
        world.call("POST", f"concerts/{concert_id}/tickets", {"buyer": "Alan", "quantity": 2})[0]
        == 409
    )  # sold out
    assert [(e["action"], e["version"]) for e in world.events()] == [
        ("ConcertAnnounced", 1),
        ("TicketsSold", 2),
    ]


def test_concurrent_buyers_never_oversell(world: World) -> None:
    concert_id = announced(world, capacity=5)
    with ThreadPoolExecutor(4) as pool:
        statuses = list(
            pool.map(
                lambda n: world.call(
                    "POST", f"concerts/{concert_id}/tickets", {"buyer": f"b{n}", "quantity": 1}
                )[0],
                range(8),
            )
        )
    assert sorted(statuses) == [201] * 5 + [409] * 3
    assert world.call("GET", f"concerts/{concert_id}")[1]["sold"] == 5
    assert [e["version"] for e in world.events()] == list(range(1, 7))


def test_a_purchase_retried_with_its_idempotency_key_buys_once(world: World) -> None:
    concert_id = announced(world)
    key = {"Idempotency-Key": "purchase-1"}
    first = world.call(
        "POST", f"concerts/{concert_id}/tickets", {"buyer": "Grace", "quantity": 1}, key
    )
    again = world.call(
        "POST", f"concerts/{concert_id}/tickets", {"buyer": "Grace", "quantity": 1}, key
    )
    assert first == again and first[0] == 201
    assert world.call("GET", f"concerts/{concert_id}")[1]["sold"] == 1
    other = world.call(
        "POST", f"concerts/{concert_id}/tickets", {"buyer": "Alan", "quantity": 1}, key
    )
    assert other[0] == 422


def test_bad_input_is_refused_and_writes_nothing(world: World) -> None:
    assert world.call("POST", "concerts", {"name": "", "capacity": 0})[0] == 422
    assert world.call("GET", "concerts/nope")[0] == 404
    assert world.memory.store.batches == 0


def test_the_relay_sends_every_event_in_order_per_concert(world: World) -> None:
    concert_id = announced(world)
    world.call("POST", f"concerts/{concert_id}/tickets", {"buyer": "Grace", "quantity": 1})
    world.client.relay(world.memory.store.of_type("domainEvent"))
    messages = world.memory.publisher.messages
    assert [(m.subject, m.version, m.session_id) for m in messages] == [
        ("ConcertAnnounced", 1, concert_id),
        ("TicketsSold", 2, concert_id),
    ]
    assert {m.application_properties["aggregateType"] for m in messages} == {"concert"}
    assert {m.source for m in messages} == {"/concerts"}
