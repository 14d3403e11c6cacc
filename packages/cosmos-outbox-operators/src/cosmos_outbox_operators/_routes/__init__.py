"""The operators' routes (`/outbox/...` by default, auth level ADMIN: the host's master key), one
module per resource, each declaring its routes over the core's one operators' API
(`cosmos_outbox.operations`) and answering with its results: `status` (the relay's state, the
backlog's last hour, the anonymous `outbox/health`), `quarantine`, `redrive`, `dead_letters`,
`groups` (failures by cause), `journey` (and an aggregate's documents), `subscribers`; the
models an app extends are `models`'.

Each route but `outbox/health` (anonymous) is also served to a signed-in operator under
`/outbox/console/...`, and the console page at `/outbox/console` shows them
(`cosmos_outbox_operators._console`: two doors, one implementation); who acts is the operator a
door admitted (`cosmos_outbox.operations.acting_as`). The command line (`cosmos-outbox`) and the
console call these routes, and nothing else. Every action's answer says what subscribers will
see (`subscribersWillSee`), as its audit line does."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import azure.functions as func

from cosmos_outbox.http import HttpApi
from cosmos_outbox_operators._console.doors import OperatorDoors
from cosmos_outbox_operators._console.identity import OPERATOR_ROLE
from cosmos_outbox_operators._routes import (
    dead_letters,
    groups,
    journey,
    quarantine,
    redrive,
    status,
    subscribers,
)
from cosmos_outbox_operators._routes._context import Routes
from cosmos_outbox_operators._routes.models import (
    OperatorModels,
    QuarantineItem,
    QuarantineListPage,
    RedriveRequest,
)
from cosmos_outbox_operators._types import PARAMETERS, parse_instant

if TYPE_CHECKING:
    from cosmos_outbox.operations import Actor, Operations

__all__ = [
    "OperatorModels",
    "QuarantineItem",
    "QuarantineListPage",
    "RedriveRequest",
    "parse_instant",
    "routes_blueprint",
]

#: The route modules, in the order their routes are declared.
RESOURCES = (status, quarantine, redrive, dead_letters, groups, journey, subscribers)


def routes_blueprint(
    operations: Callable[[], Operations],
    *,
    asynchronous: bool,
    models: OperatorModels = OperatorModels(),  # noqa: B008  # frozen: one shared value
    route_prefix: str = "outbox",
    auth_level: func.AuthLevel = func.AuthLevel.ADMIN,
    console: bool = True,
    operator_role: str = OPERATOR_ROLE,
    actor: Actor | None = None,
) -> func.Blueprint:
    """The operators' routes under `route_prefix` (`outbox/status`, `outbox/quarantine`, ...),
    at `auth_level` (ADMIN: the host's master key), served by `operations()`; `models` are the
    request and answer models (an app's subclasses). Bounded: a store or a broker that hangs
    makes an operator's call a 503 + Retry-After within BOUND_SECONDS, as /health, never a wait
    on the SDKs' own timeouts and retries. With `console`, each route also under
    `route_prefix/console/` for a signed-in operator with the app role `operator_role`, and the
    console page at `route_prefix/console` (`cosmos_outbox_operators._console`). `actor`: the
    routes served in-process to that actor (the command line on the stores: no host, no key)."""
    prefix = route_prefix.strip("/")
    doors = OperatorDoors(
        prefix=prefix,
        parameters=PARAMETERS,
        auth_level=auth_level,
        console=console,
        role=operator_role,
        actor=actor,
    )
    # outbox/health is anonymous: through neither door (no key, no sign-in), bounded like them
    anonymous = HttpApi(
        doors.blueprint, parameters={}, auth_level=func.AuthLevel.ANONYMOUS, bounded=True
    )

    def operation(**declared: Any) -> Callable[[Any], Any]:
        return doors.operation(asynchronous=asynchronous, **declared)

    def anonymous_operation(**declared: Any) -> Callable[[Any], Any]:
        return anonymous.operation(asynchronous=asynchronous, **declared)

    routes = Routes(prefix, operations, operation, anonymous_operation, models)
    for resource in RESOURCES:
        resource.declare(routes)
    if console:
        from cosmos_outbox_operators._console.page import register_page

        register_page(doors)
    return doors.blueprint
