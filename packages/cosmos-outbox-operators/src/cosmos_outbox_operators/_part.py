"""The operators' routes as a part of an app: `Operators(...)` among `Outbox.function_app`'s
parts (`outbox.function_app(orders, Operators(), title="Orders")`), or the blueprint à la carte
for an app that builds its own `func.FunctionApp` (`operators_blueprint(outbox, ...)`). Both
serve the outbox's one operators' API, `outbox.operations()` (`cosmos_outbox.operations`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import azure.functions as func

from cosmos_outbox_operators._console.identity import OPERATOR_ROLE
from cosmos_outbox_operators._routes import OperatorModels, routes_blueprint

if TYPE_CHECKING:
    from cosmos_outbox import Outbox
    from cosmos_outbox.aio import Outbox as AsyncOutbox

__all__ = ["Operators", "operators_blueprint"]


def operators_blueprint(outbox: Outbox | AsyncOutbox, **options: Any) -> func.Blueprint:
    """The operators' routes (status, backlog, quarantine, dead letters, journey, subscribers,
    re-drive) under `route_prefix`, at `auth_level` (ADMIN: the host's master key); with
    `console`, also under `route_prefix/console/` for a signed-in operator with the app role
    `operator_role` (App Service Authentication), and the console page at
    `route_prefix/console`. Served by `outbox.operations()`, sync or async as the outbox is.
    `options` are `Operators`' fields."""
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
        """The blueprint of these routes served by `outbox` (what `function_app` calls)."""
        return routes_blueprint(outbox.operations, asynchronous=outbox.asynchronous, options=self)
