"""The operators' routes' models, for an app that extends them (an alias of one aggregate type's
id its operators know, say): subclass `RedriveRequest` (overriding `scope`), `QuarantineItem`
(overriding `fields_of`) and `QuarantineListPage`, and give them to the outbox as
`OperatorModels` (`Outbox.function_app(operators=...)`, `Outbox.operators_blueprint(models=
...)`): the routes, their parsing and the OpenAPI document then read the app's models."""

from __future__ import annotations

from cosmos_outbox._blueprints.operator_routes import (
    OperatorModels,
    QuarantineItem,
    QuarantineListPage,
    RedriveRequest,
    parse_instant,
)
from cosmos_outbox._quarantine import QuarantinedEvent

__all__ = [
    "OperatorModels",
    "QuarantineItem",
    "QuarantineListPage",
    "QuarantinedEvent",
    "RedriveRequest",
    "parse_instant",
]
