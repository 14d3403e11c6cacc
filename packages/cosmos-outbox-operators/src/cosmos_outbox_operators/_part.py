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


def operators_blueprint(
    outbox: Outbox | AsyncOutbox,
    *,
    models: OperatorModels = OperatorModels(),  # noqa: B008  # frozen: one shared value
    route_prefix: str = "outbox",
    auth_level: func.AuthLevel = func.AuthLevel.ADMIN,
    console: bool = True,
    operator_role: str = OPERATOR_ROLE,
) -> func.Blueprint:
    """The operators' routes (status, backlog, quarantine, dead letters, journey, subscribers,
    re-drive) under `route_prefix`, at `auth_level` (ADMIN: the host's master key); with
    `console`, also under `route_prefix/console/` for a signed-in operator with the app role
    `operator_role` (App Service Authentication), and the console page at
    `route_prefix/console`. Served by `outbox.operations()`, sync or async as the outbox is."""
    return routes_blueprint(
        outbox.operations,
        asynchronous=outbox.asynchronous,
        models=models,
        route_prefix=route_prefix,
        auth_level=auth_level,
        console=console,
        operator_role=operator_role,
    )


@dataclass(frozen=True)
class Operators:
    """The operators' routes and console, as a part of `Outbox.function_app`:
    `outbox.function_app(orders, Operators(), title="Orders")`. Its options are
    `operators_blueprint`'s."""

    models: OperatorModels = field(default_factory=OperatorModels)
    route_prefix: str = "outbox"
    auth_level: func.AuthLevel = func.AuthLevel.ADMIN
    console: bool = True
    operator_role: str = OPERATOR_ROLE

    def blueprint_for(self, outbox: Any) -> func.Blueprint:
        """The blueprint of these routes served by `outbox` (what `function_app` calls)."""
        return operators_blueprint(
            outbox,
            models=self.models,
            route_prefix=self.route_prefix,
            auth_level=self.auth_level,
            console=self.console,
            operator_role=self.operator_role,
        )
