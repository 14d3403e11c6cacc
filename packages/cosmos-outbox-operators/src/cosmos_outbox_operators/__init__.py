"""cosmos-outbox-operators: the operators' ways into an outbox -- its routes, the console page
that shows them, and the command line's commands -- over the core's one operators' API
(`cosmos_outbox.operations`), using the core's public names only.

    from cosmos_outbox_operators import Operators
    app = outbox.function_app(orders, Operators(), title="Orders API")

`Operators` (a part of `Outbox.function_app`) or `operators_blueprint(outbox, ...)` (à la
carte); the models the routes parse and answer with, for an app that extends them
(`OperatorModels`: subclass `RedriveRequest` (overriding `scope`), `QuarantineItem` (overriding
`fields_of`) and `QuarantineListPage`); `parse_instant`; `OPERATOR_ROLE`, the app role a
signed-in operator needs for the console (App Service Authentication, Entra ID). The command
line: `cosmos_outbox_operators.cli` (its commands run as `cosmos-outbox <command>`).
"""

from __future__ import annotations

from cosmos_outbox_operators._console.identity import OPERATOR_ROLE
from cosmos_outbox_operators._part import Operators, operators_blueprint
from cosmos_outbox_operators._routes import (
    OperatorModels,
    QuarantineItem,
    QuarantineListPage,
    RedriveRequest,
    parse_instant,
)

__version__ = "0.1.0"

__all__ = [
    "OPERATOR_ROLE",
    "OperatorModels",
    "Operators",
    "QuarantineItem",
    "QuarantineListPage",
    "RedriveRequest",
    "__version__",
    "operators_blueprint",
    "parse_instant",
]
