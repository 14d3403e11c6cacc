"""The operators' routes as a part of an app: `Operators(...)` among `Outbox.function_app`'s
parts (`outbox.function_app(orders, Operators(), title="Orders")`), or the blueprint à la carte
for an app that builds its own `func.FunctionApp` (`operators_blueprint(outbox, ...)`). Both
serve the outbox's one operators' API, `outbox.operations()` (`cosmos_outbox.operations`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import azure.functions as func

from cosmos_outbox.http import HttpApi
from cosmos_outbox.http.bounded import BOUND_SECONDS
from cosmos_outbox_operators._console.doors import OperatorDoors
from cosmos_outbox_operators._console.identity import OPERATOR_ROLE
from cosmos_outbox_operators._routes import RESOURCES
from cosmos_outbox_operators._routes._context import Routes
from cosmos_outbox_operators._routes.models import OperatorModels
from cosmos_outbox_operators._types import PARAMETERS

if TYPE_CHECKING:
    from cosmos_outbox import Outbox
    from cosmos_outbox.aio import Outbox as AsyncOutbox
    from cosmos_outbox.operations import Actor, Operations

__all__ = ["Operators", "operators_blueprint", "routes_blueprint"]


def operators_blueprint(outbox: Outbox | AsyncOutbox, **options: Any) -> func.Blueprint:
    """The operators' routes of `outbox` (`routes_blueprint`); `options` are `Operators`'
    fields."""
    return Operators(**options).blueprint_for(outbox)


@dataclass(frozen=True)
class Operators:
    """The operators' routes and console, as a part of `Outbox.function_app`:
    `outbox.function_app(orders, Operators(), title="Orders")`, or à la carte,
    `operators_blueprint(outbox, ...)`: the models the routes parse and answer with (an app's
    subclasses), their prefix, their auth level, the console, the operator's app role."""

    models: OperatorModels = field(default_factory=OperatorModels)
    route_prefix: str = "outbox"
    auth_level: func.AuthLevel = func.AuthLevel.ADMIN
    console: bool = True
    operator_role: str = OPERATOR_ROLE

    def blueprint_for(self, outbox: Any) -> func.Blueprint:
        """The blueprint of these routes served by `outbox` (what `function_app` calls), within
        its bound (`outbox.bound_seconds`)."""
        return routes_blueprint(
            outbox.operations,
            asynchronous=outbox.asynchronous,
            options=self,
            bound_seconds=outbox.bound_seconds,
        )


def routes_blueprint(
    operations: Callable[[], Operations],
    *,
    asynchronous: bool,
    options: Operators,
    actor: Actor | None = None,
    bound_seconds: float = BOUND_SECONDS,
) -> func.Blueprint:
    """The operators' routes under `options.route_prefix` (`outbox/status`, ...), at
    `options.auth_level` (ADMIN: the host's master key), served by `operations()`, parsing and
    answering `options.models` (an app's subclasses). Bounded: a store or a broker that hangs
    makes a call a 503 + Retry-After within `bound_seconds` (the outbox's), never a wait on the
    SDKs' own timeouts. With `options.console`, each also under `route_prefix/console/` for a
    signed-in operator with the app role `options.operator_role`, and the console page at
    `route_prefix/console`. `actor`: served in-process to that actor (the command line)."""
    prefix = options.route_prefix.strip("/")
    doors = OperatorDoors(
        prefix=prefix,
        parameters=PARAMETERS,
        auth_level=options.auth_level,
        console=options.console,
        role=options.operator_role,
        actor=actor,
        bound_seconds=bound_seconds,
    )
    # outbox/health is anonymous: through neither door (no key, no sign-in), bounded like them
    anonymous = HttpApi(
        doors.blueprint,
        parameters={},
        auth_level=func.AuthLevel.ANONYMOUS,
        bounded=True,
        bound_seconds=bound_seconds,
    )

    def operation(**declared: Any) -> Callable[[Any], Any]:
        return doors.operation(asynchronous=asynchronous, **declared)

    def anonymous_operation(**declared: Any) -> Callable[[Any], Any]:
        return anonymous.operation(asynchronous=asynchronous, **declared)

    routes = Routes(prefix, operations, operation, anonymous_operation, options.models)
    for resource in RESOURCES:
        resource.declare(routes)
    if options.console:
        from cosmos_outbox_operators._console.page import register_page

        register_page(doors)
    return doors.blueprint
