"""The app's mappings, held by cosmos-outbox's checks: an event, a field or a route left
unmapped fails here, by name."""

from __future__ import annotations

import json

from conftest import World

from cosmos_outbox_testing import (
    check_commands,
    check_event_mappings,
    check_fields,
    check_openapi_events,
    check_text_schemas,
)
from orders.api import PlaceOrder
from orders.domain import Order


def test_every_event_maps_to_the_document_the_message_and_a_cloudevent() -> None:
    check_event_mappings([Order])


def test_the_openapi_document_lists_exactly_the_events_of_the_app(world: World) -> None:
    document = json.loads(world.client.request("GET", "openapi.json").get_body())
    check_openapi_events(document, [Order])


def test_every_route_calls_its_aggregate_with_what_it_accepts(world: World) -> None:
    check_commands(world.app)


def test_every_field_a_client_sets_travels_in_the_placed_event() -> None:
    check_fields(Order, kept={"status"})


def test_every_text_field_publishes_what_it_validates() -> None:
    check_text_schemas([PlaceOrder])
