"""The test kit's checks pass on an app that maps everything, and each fails, by name, on the
defect it is there to catch: a PATCH field the aggregate's change does not accept, an
aggregate whose events are not in the OpenAPI document, an event class that does not map, a
text type whose published schema is not what it validates."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from conftest import TicketWorld
from pydantic import Field, StringConstraints
from tickets import (
    ChangeTicket,
    OpenTicket,
    Ticket,
    TicketOpened,
    TicketView,
    Title,
)

from cosmos_outbox._outbox import Outbox
from cosmos_outbox.aggregates import Aggregate, Event
from cosmos_outbox.http._models import RequestModel
from cosmos_outbox.text import Text
from cosmos_outbox_testing import (
    FunctionClient,
    check_commands,
    check_event_mappings,
    check_fields,
    check_openapi_events,
    check_text_schemas,
    in_memory,
)


def openapi(world: TicketWorld) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(world.client.request("GET", "openapi.json").get_body())
    return document


def test_every_check_passes_on_an_app_that_maps_everything(world: TicketWorld) -> None:
    check_event_mappings([Ticket])
    check_openapi_events(openapi(world), [Ticket])
    check_commands(world.app)
    check_fields(Ticket, patch=ChangeTicket, kept={"closed"})
    check_text_schemas([OpenTicket, ChangeTicket])


class ChangeTicketWithPriority(RequestModel):
    title: Title | None = None
    priority: int | None = None


def test_a_patch_field_the_aggregate_does_not_accept_fails_check_commands() -> None:
    memory = in_memory()
    outbox = Outbox([Ticket], services=lambda: memory.services)
    tickets = outbox.routes(Ticket, view=TicketView)
    tickets.update(
        route="tickets/{id}",
        method="PATCH",
        request=ChangeTicketWithPriority,
        apply=Ticket.change,
        summary="Change a ticket",
    )
    app = outbox.function_app(tickets, title="Tickets")
    with pytest.raises(AssertionError, match=r"patch_ticket: .*\['priority'\].*does not accept"):
        check_commands(app)
    # and what the check prevents: the route answers 500 when the field is sent
    client = FunctionClient(app)
    created = Ticket.open("T")
    outbox.service(Ticket).create(created)
    reply = client.request("PATCH", f"tickets/{created.id}", body={"priority": 1})
    assert reply.status_code == 500


def test_an_aggregate_missing_from_the_openapi_document_fails_check_openapi_events(
    world: TicketWorld,
) -> None:
    class Note(Aggregate):
        pass

    @Note.event("NoteWrittenEvent")
    class NoteWritten(Event):
        pass

    with pytest.raises(
        AssertionError,
        match=r"missing from the OpenAPI document: "
        r"\['NoteWrittenEvent'\]",
    ):
        check_openapi_events(openapi(world), [Ticket, Note])
    with pytest.raises(AssertionError, match="lists events of no registered aggregate"):
        check_openapi_events(openapi(world), [])


def test_an_event_that_does_not_read_back_fails_check_event_mappings() -> None:
    class Memo(Aggregate):
        pass

    @Memo.event("MemoLostEvent")
    class MemoLost(Event):
        """A field that never reaches the document (excluded when dumped)."""

        secret: str = Field(exclude=True)

    with pytest.raises(AssertionError, match="MemoLostEvent"):
        check_event_mappings([Memo])


class TitleOnly(RequestModel):
    title: Title | None = None


def test_a_field_a_client_cannot_set_or_that_travels_in_no_event_fails_check_fields() -> None:
    with pytest.raises(
        AssertionError,
        match=r"no event of Ticket carries every field a client "
        r"sets: \['closed', 'code', 'title'\]",
    ):
        check_fields(Ticket, patch=ChangeTicket)
    with pytest.raises(
        AssertionError,
        match=r"TitleOnly changes \['title'\]; the fields a "
        r"client sets are \['code', 'title'\]",
    ):
        check_fields(Ticket, patch=TitleOnly, kept={"closed"})


class _PatternReplaced:
    """The defect the check exists for: a JSON-schema hook that sets the text rule's pattern
    over the field's own (what a Text did before it kept both)."""

    @staticmethod
    def __get_pydantic_json_schema__(schema: Any, handler: Any) -> Any:
        published = handler(schema)
        published["pattern"] = ".*"
        return published


class Coded(RequestModel):
    code: Annotated[
        str, StringConstraints(pattern=r"^[A-Z]{3}$"), Text(max_length=3), _PatternReplaced
    ]


def test_a_text_schema_that_is_not_what_it_validates_fails_check_text_schemas() -> None:
    with pytest.raises(
        AssertionError,
        match=r"Coded.code: .* refused by validation but "
        r"accepted by the published schema",
    ):
        check_text_schemas([Coded])


def test_a_text_type_with_its_own_pattern_publishes_both() -> None:
    schema = OpenTicket.model_json_schema()["properties"]["code"]
    assert schema["pattern"] == "^[A-Z]{3}$"
    assert [set(s) for s in schema["allOf"]] == [{"pattern"}]
    check_text_schemas([OpenTicket])


def test_every_aggregate_of_the_outbox_is_in_its_openapi_document(world: TicketWorld) -> None:
    listed = {e["aggregateType"] for e in openapi(world)["x-events"]}
    assert listed == {"ticket"}
    assert {e["action"] for e in openapi(world)["x-events"]} == {
        k.action_name() for k in Ticket.event_classes()
    }
    assert issubclass(TicketOpened, Event)
