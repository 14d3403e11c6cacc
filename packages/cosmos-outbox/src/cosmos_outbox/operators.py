"""Deprecated (removed in 0.6): the operators' routes' models moved with the routes to
cosmos-outbox-operators (`pip install cosmos-outbox-operators`): `cosmos_outbox_operators`
exports `OperatorModels`, `QuarantineItem`, `QuarantineListPage`, `RedriveRequest`,
`parse_instant` and `OPERATOR_ROLE`; `QuarantinedEvent` is the core's
`cosmos_outbox.operations.QuarantinedEvent`. Each name read here warns (DeprecationWarning)
and gives its new one."""

from __future__ import annotations

from cosmos_outbox._lazy import lazy_exports

#: Each name of 0.4 and where it went.
_MOVED = {
    **{
        name: f"cosmos_outbox_operators.{name}"
        for name in (
            "OPERATOR_ROLE",
            "OperatorModels",
            "QuarantineItem",
            "QuarantineListPage",
            "RedriveRequest",
            "parse_instant",
        )
    },
    "QuarantinedEvent": "cosmos_outbox.operations.QuarantinedEvent",
}

__all__: list[str] = []
__getattr__, __dir__ = lazy_exports(__name__, {}, renamed=_MOVED)
