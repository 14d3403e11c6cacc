"""The three routes, called through the app's indexed functions on in-memory services, and what
the relay makes of the events they write."""

from __future__ import annotations

import json
from typing import Any

import azure.functions as func
from conftest import World


def body(response: func.HttpResponse) -> Any:
    return json.loads(response.get_body())


def problem(response: func.HttpResponse, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.get_body()
    assert response.mimetype == "application/problem+json"
    document: dict[str, Any] = body(response)
    return document


def place(world: World, **fields: Any) -> func.HttpResponse:
    return world.client.request(
        "POST", "orders", body={"customerName": "Ada", "totalCents": 1250, **fields}
    )


def test_placing_an_order_answers_201_with_location_etag_and_the_order(world: World) -> None:
    reply = place(world)
    assert reply.status_code == 201, reply.get_body()
    order = body(reply)
    assert order == {
        "id": order["id"],
        "version": 1,
        "customerName": "Ada",
        "totalCents": 1250,
        "status": "placed",
    }
    assert reply.headers["Location"] == f"/api/orders/{order['id']}"
    assert reply.headers["ETag"]


def test_reading_an_order_answers_its_etag_304_when_unchanged_404_when_unknown(
    world: World,
) -> None:
    placed = place(world)
    oid, etag = body(placed)["id"], placed.headers["ETag"]
    reply = world.client.request("GET", f"orders/{oid}")
    assert (reply.status_code, reply.headers["ETag"], body(reply)["status"]) == (
        200,
        etag,
        "placed",
    )
    assert (
        world.client.request("GET", f"orders/{oid}", headers={"If-None-Match": etag}).status_code
        == 304
    )
    problem(world.client.request("GET", "orders/no-such-order"), 404)


def test_cancelling_answers_200_then_409_and_honours_if_match(world: World) -> None:
    placed = place(world)
    oid, etag = body(placed)["id"], placed.headers["ETag"]
    problem(
        world.client.request(
            "POST", f"orders/{oid}/cancel", headers={"If-Match": '"not-the-etag"'}
        ),
        412,
    )
    reply = world.client.request("POST", f"orders/{oid}/cancel", headers={"If-Match": etag})
    assert (reply.status_code, body(reply)["status"], body(reply)["version"]) == (
        200,
        "cancelled",
        2,
    )
    assert reply.headers["ETag"] != etag
    again = problem(world.client.request("POST", f"orders/{oid}/cancel"), 409)
    assert again["detail"] == f"order {oid} is already cancelled"


BAD: list[tuple[dict[str, Any], str]] = [
    ({"totalCents": -1}, "totalCents"),
    ({"totalCents": "1"}, "totalCents"),
    ({"totalCents": True}, "totalCents"),
    ({"customerName": ""}, "customerName"),
    ({"customerName": "Ada\u0000"}, "customerName"),
    ({"status": "cancelled"}, "status"),
]


def test_bad_orders_are_400_problems_and_write_nothing(world: World) -> None:
    for fields, field in BAD:
        doc = problem(place(world, **fields), 400)
        assert doc["errors"][0]["field"] == field
    assert world.memory.store.batches == 0


def test_the_events_reach_the_topic_in_order_under_the_order_type(world: World) -> None:
    placed = place(world)
    oid = body(placed)["id"]
    world.client.request("POST", f"orders/{oid}/cancel")
    world.client.relay(world.memory.store.of_type("domainEvent"))
    messages = world.memory.publisher.messages
    assert [(m.subject, m.version, m.session_id) for m in messages] == [
        ("OrderPlaced", 1, oid),
        ("OrderCancelled", 2, oid),
    ]
    assert {m.application_properties["aggregateType"] for m in messages} == {"order"}
    assert {m.application_properties["orderId"] for m in messages} == {oid}
    assert {m.source for m in messages} == {"/orders"}


def test_writes_retried_with_their_idempotency_key_have_one_effect(world: World) -> None:
    key = {"Idempotency-Key": '"order-1"'}
    placed = world.client.request(
        "POST", "orders", headers=key, body={"customerName": "Ada", "totalCents": 1250}
    )
    again = world.client.request(
        "POST", "orders", headers=key, body={"customerName": "Ada", "totalCents": 1250}
    )
    assert placed.status_code == again.status_code == 201
    assert (again.headers["Location"], again.get_body()) == (
        placed.headers["Location"],
        placed.get_body(),
    )
    oid = body(placed)["id"]
    cancel = {"Idempotency-Key": "cancel-1"}
    first = world.client.request("POST", f"orders/{oid}/cancel", headers=cancel)
    retry = world.client.request("POST", f"orders/{oid}/cancel", headers=cancel)
    assert first.status_code == retry.status_code == 200  # not 409: it is the same cancel
    assert retry.get_body() == first.get_body()
    other = world.client.request(
        "POST", "orders", headers=key, body={"customerName": "Bob", "totalCents": 1}
    )
    problem(other, 422)
    assert sorted(e.type for e in world.memory.events()) == ["OrderCancelled", "OrderPlaced"]
