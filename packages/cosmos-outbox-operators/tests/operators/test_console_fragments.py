"""The console renders each route's answer with the fragment its name or its kind of answer gives,
read from the app as indexed: a route is registered once, where it is declared. A route that
answers a bulk operation (its declared answer, `Operation`) shows the operation's progress
whatever its name; no console route falls back to its answer shown as JSON."""

from __future__ import annotations

from conftest import TicketWorld

from cosmos_outbox.http import operation_of
from cosmos_outbox.operations import Operation
from cosmos_outbox_operators._console.doors import CONSOLE_SEGMENT
from cosmos_outbox_operators._console.render import template_name

GENERIC = "fragments/answer.html"


def test_every_console_route_has_a_fragment_of_its_own_or_of_its_kind(world: TicketWorld) -> None:
    declared = {
        name: operation_of(f.get_user_function()) for name, f in world.client.functions.items()
    }
    console = {
        name.removeprefix(f"{CONSOLE_SEGMENT}_"): op
        for name, op in declared.items()
        if op is not None and name.startswith(f"{CONSOLE_SEGMENT}_")
    }
    assert {"outbox_status", "list_operations", "act_on_group"} <= set(console)
    generic = sorted(n for n, op in console.items() if template_name(n, op.response) == GENERIC)
    assert not generic, f"console routes whose answer the page shows as JSON: {generic}"
    operations = {n for n, op in console.items() if op.response is Operation}
    assert {"act_on_group", "redrive_events_operation", "cancel_operation"} <= operations
    assert {template_name(n, Operation) for n in operations} == {"fragments/_operation.html"}


def test_a_new_route_answering_an_operation_needs_no_registration() -> None:
    class AppOperation(Operation):
        """An app's own answer, extending the operation."""

    assert template_name("archive_everything", AppOperation) == "fragments/_operation.html"
    assert template_name("archive_everything", None) == GENERIC
