"""An app on the package (the core's tickets app, tickets.py, with `Operators()` among its
parts) is its routes, the outbox's functions, the operators' and the docs (moved from the core's
http_api/test_ticket_app.py: the operators' functions are this package's)."""

from __future__ import annotations

from conftest import TicketWorld
from operator_functions import OPERATORS, RELAY


def test_the_app_is_its_routes_the_outbox_functions_and_the_docs(world: TicketWorld) -> None:
    # the operators' functions: both doors and the console page (test_console.py)
    assert set(world.client.functions) == RELAY | OPERATORS | {
        "open_ticket",
        "get_ticket",
        "patch_ticket",
        "post_ticket",
        "health",
        "openapi",
        "zz_not_routed",
    }
