"""Deprecated (removed in 0.6): the contract suites are cosmos-outbox-testing's,
`cosmos_outbox_testing.contracts`, with the same names. Each name read here warns
(DeprecationWarning) and gives the kit's."""

from __future__ import annotations

from cosmos_outbox._lazy import lazy_exports
from cosmos_outbox._renamed import MovedNames

__all__: list[str] = []
__getattr__, __dir__ = lazy_exports(
    __name__, {}, renamed=MovedNames("cosmos_outbox_testing.contracts")
)
