"""The operators' routes' models, for an app that extends them (an alias of one aggregate type's
id its operators know, say): subclass `RedriveRequest` (overriding `scope`), `QuarantineItem`
(overriding `fields_of`) and `QuarantineListPage`, and give them to the outbox as
`OperatorModels` (`Outbox.function_app(operators=...)`, `Outbox.operators_blueprint(models=
...)`): the routes, their parsing and the OpenAPI document then read the app's models.
`OPERATOR_ROLE` is the app role a signed-in operator needs for the operators' console (App
Service Authentication, Entra ID: the package README, "The operators' console")."""

from __future__ import annotations

from cosmos_outbox._blueprints.operator_routes import (
    OperatorModels,
    QuarantineItem,
    QuarantineListPage,
    RedriveRequest,
    parse_instant,
)
from cosmos_outbox._console.identity import OPERATOR_ROLE
from cosmos_outbox._quarantine import QuarantinedEvent

__all__ = [
    "OPERATOR_ROLE",
    "OperatorModels",
    "QuarantineItem",
    "QuarantineListPage",
    "QuarantinedEvent",
    "RedriveRequest",
    "parse_instant",
]
