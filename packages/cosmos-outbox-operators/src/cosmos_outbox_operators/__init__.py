"""cosmos-outbox-operators: the operators' ways into an outbox -- its routes, the console page
that shows them, and the command line's commands -- over the core's one operators' API
(`cosmos_outbox.operations`), using the core's public names only (the package README).

    from cosmos_outbox_operators import Operators
    app = outbox.function_app(orders, Operators(), title="Orders API")
"""

from __future__ import annotations

from cosmos_outbox_operators._console.identity import OPERATOR_ROLE
from cosmos_outbox_operators._part import Operators, operators_blueprint
from cosmos_outbox_operators._routes.models import (
    OperatorModels,
    QuarantineItem,
    QuarantineListPage,
    RedriveRequest,
    RedriveScope,
)
from cosmos_outbox_operators._types import parse_instant

#: Its pyproject.toml's version (tests/repository/test_versions.py holds them equal; a literal,
#: not importlib.metadata's: no file read at import).
__version__ = "0.1.0"

__all__ = [
    "OPERATOR_ROLE",
    "OperatorModels",
    "Operators",
    "QuarantineItem",
    "QuarantineListPage",
    "RedriveRequest",
    "RedriveScope",
    "__version__",
    "operators_blueprint",
    "parse_instant",
]
