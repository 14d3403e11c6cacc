"""Every kind of bulk operation in `BULK_KINDS` (issue 97 item 1: the kinds in one table) is
served end to end, enumerated from the table: started through its route (through the console's
signed-in door, as the page starts it), rendered by the console's operation fragment with the
kind's outcome, worked by the relay's worker, and offered by the command line with the canary's
flags and the reason the table says. A kind added to the table with no way to start it here
fails `test_each_kind_has_a_way_in`."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import body
from recovery_world import SUBSCRIPTION, RecoveryWorld

from cosmos_outbox.operations import BULK_KINDS
from cosmos_outbox_operators.cli._commands import parser
from cosmos_outbox_testing import run_sync


def _principal() -> str:
    claims = [{"typ": "name", "val": "ada@example.com"}, {"typ": "roles", "val": "Outbox.Operator"}]
    document = {"auth_typ": "aad", "claims": claims, "name_typ": "name", "role_typ": "roles"}
    return base64.b64encode(json.dumps(document).encode()).decode()


#: The console page's own request: the operator, same origin, its token, asking for HTML.
PAGE = {
    "x-ms-client-principal": _principal(),
    "host": "localhost",
    "origin": "http://localhost",
    "cookie": "outbox-console-csrf=t",
    "x-csrf-token": "t",
    "hx-request": "true",
}


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecoveryWorld]:
    monkeypatch.setenv("WEBSITE_AUTH_ENABLED", "True")
    monkeypatch.setenv("OUTBOX_CONSOLE_SIGN_IN", "app-service-authentication")
    yield from RecoveryWorld.running()


def _dead_lettered(world: RecoveryWorld) -> None:
    ids = world.publish("w1", "StockAdded", "StockAdded")
    world.relay()
    world.deliver_new(skip=set(ids))


def _group(world: RecoveryWorld) -> str:
    _dead_lettered(world)
    [group] = body(world.call("GET", "outbox/groups"))["groups"]
    return str(group["id"])


def _letters(world: RecoveryWorld, action: str) -> str:
    _dead_lettered(world)
    return f"deadletters/{SUBSCRIPTION}/{action}/operation"


#: How each kind is started, as the console's page starts it: its route and body.
WAYS_IN: dict[str, Callable[[RecoveryWorld], tuple[str, dict[str, Any]]]] = {
    "groups.retry": lambda w: (f"groups/{_group(w)}/act", {"action": "retry"}),
    "groups.discard": lambda w: (
        f"groups/{_group(w)}/act",
        {"action": "discard", "reason": "closed"},
    ),
    "deadletters.resubmit": lambda w: (_letters(w, "resubmit"), {"all": True}),
    "deadletters.discard": lambda w: (_letters(w, "discard"), {"all": True, "reason": "closed"}),
    "redrive": lambda w: ("redrive/operation", {"since": "2000-01-01T00:00:00Z"}),
}

#: How each kind is started from the command line.
COMMANDS: dict[str, list[str]] = {
    "groups.retry": ["groups", "retry", "g1"],
    "groups.discard": ["groups", "discard", "g1", "--reason", "closed"],
    "deadletters.resubmit": ["deadletters", "resubmit", SUBSCRIPTION, "--all"],
    "deadletters.discard": ["deadletters", "discard", SUBSCRIPTION, "--all", "--reason", "x"],
    "redrive": ["redrive", "--since", "2000-01-01T00:00:00Z", "--operation"],
}


def test_each_kind_has_a_way_in() -> None:
    assert set(WAYS_IN) == set(COMMANDS) == set(BULK_KINDS)
    assert len({s.outcome for s in BULK_KINDS.values()}) == len(BULK_KINDS)


@pytest.mark.parametrize("kind", list(BULK_KINDS))
def test_each_kind_is_started_rendered_and_worked(world: RecoveryWorld, kind: str) -> None:
    spec = BULK_KINDS[kind]
    route, request = WAYS_IN[kind](world)
    reply = world.call("POST", f"outbox/console/{route}", headers=PAGE, body=request)
    assert reply.status_code in (200, 202) and reply.mimetype == "text/html", reply.get_body()
    html = reply.get_body().decode()
    assert re.search(rf'data-outcome="{re.escape(spec.outcome)}"', html), html
    [operation_id] = re.findall(r'data-operation-id="([^"]+)"', html)
    assert spec.does in html
    # the worker serves it: its items counted through the kind's items, acted on
    run_sync(world.outbox.wiring().operations().bulk.work(budget_seconds=60))
    shown = body(world.call("GET", f"outbox/operations/{operation_id}"))
    assert shown["kind"] == kind and shown["itemsKnown"], shown
    assert (shown["state"], shown["failed"]) == ("done", 0), shown  # its items: at most 2
    assert (shown["canary"] > 0) == spec.canary, shown
    assert ("the canary held every item" in (shown["note"] or "")) == spec.canary, shown
    assert shown["summary"].startswith(spec.does)


@pytest.mark.parametrize("kind", list(BULK_KINDS))
def test_the_command_line_offers_each_kind_with_its_canary_and_reason(kind: str) -> None:
    spec = BULK_KINDS[kind]
    args = parser().parse_args(COMMANDS[kind])
    assert hasattr(args, "canary") == spec.canary
    if spec.reason:  # refused without it
        without = COMMANDS[kind][: COMMANDS[kind].index("--reason")]
        with pytest.raises(SystemExit):
            parser().parse_args(without)


def test_the_canarys_bounds_are_the_cores_in_the_route_the_use_case_and_the_page(
    world: RecoveryWorld,
) -> None:
    bounds = BULK_KINDS.canary
    group = _group(world)
    for canary, wait in ((bounds.most + 1, 1), (1, bounds.most_wait_seconds + 1)):
        too_many = {"action": "retry", "canary": canary, "canaryWaitSeconds": wait}
        refused = world.call("POST", f"outbox/groups/{group}/act", body=too_many)
        assert refused.status_code == 400, refused.get_body()
    html = world.call("GET", "outbox/console/groups", headers=PAGE).get_body().decode()
    assert f'name="canary" type="number" min="0" max="{bounds.most}" value="{bounds.size}"' in html
    shown = world.call("POST", f"outbox/groups/{group}/act", body={"action": "retry"})
    assert (body(shown)["canary"], body(shown)["canaryWaitSeconds"]) == (
        bounds.size,
        bounds.wait_seconds,
    )
