"""Relay and operators à la carte (the package README, "Or start from our building blocks"):
`Outbox.function_app` registers the relay, the operators' routes and the docs unless told not
to; an app of its own registers the parts it wants, the operators' routes under its prefix and
at its auth level."""

from __future__ import annotations

import json

import azure.functions as func
from conftest import TicketWorld
from operator_functions import KEYED, OPERATORS, RELAY
from tickets import Ticket, ticket_routes

from cosmos_outbox import Outbox
from cosmos_outbox_testing import FunctionClient


def trigger_of(client: FunctionClient, name: str) -> dict[str, str]:
    trigger: dict[str, str] = json.loads(client.functions[name].get_function_json())["bindings"][0]
    return trigger


def names(app: func.FunctionRegister) -> set[str]:
    return set(FunctionClient(app).functions)


def test_function_app_leaves_out_the_relay_or_the_operators_when_told(
    world: TicketWorld,
) -> None:
    outbox = Outbox([Ticket], services=lambda: world.memory.services)
    everything = names(outbox.function_app(ticket_routes(outbox), title="T"))
    assert RELAY | OPERATORS | {"health", "openapi", "zz_not_routed"} <= everything
    without = names(
        outbox.function_app(ticket_routes(outbox), title="T", relay=False, operators=False)
    )
    assert everything - without == RELAY | OPERATORS


def test_an_app_of_its_own_mounts_the_operators_routes_under_its_prefix_and_auth_level(
    world: TicketWorld,
) -> None:
    outbox = Outbox([Ticket], services=lambda: world.memory.services)
    app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
    app.register_functions(outbox.relay_blueprint())
    app.register_functions(
        outbox.operators_blueprint(route_prefix="ops/outbox", auth_level=func.AuthLevel.FUNCTION)
    )
    client = FunctionClient(app)
    assert set(client.functions) == RELAY | OPERATORS
    for name in OPERATORS:
        trigger = json.loads(client.functions[name].get_function_json())["bindings"][0]
        assert trigger["route"].startswith("ops/outbox/")
        # the signed-in door and the page are the host's ANONYMOUS: the package admits the
        # operator (tests/operators/test_console.py)
        assert trigger["authLevel"] == ("FUNCTION" if name in KEYED else "ANONYMOUS")
    assert trigger_of(client, "outbox_health")["route"] == "ops/outbox/health"
    reply = client.request("GET", "ops/outbox/status")
    assert reply.status_code == 200
    default = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
    default.register_functions(outbox.operators_blueprint())
    bindings = {
        f.get_function_name(): json.loads(f.get_function_json())["bindings"][0]
        for f in default.get_functions()
    }
    # the master key, by default
    assert {bindings[name]["authLevel"] for name in KEYED} == {"ADMIN"}
    assert all(b["route"].startswith("outbox/") for b in bindings.values())
