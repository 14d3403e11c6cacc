"""Deprecated (removed in 0.6): the test kit is cosmos-outbox-testing (`pip install
cosmos-outbox-testing`), imported as `cosmos_outbox_testing`, with the same names. Each name read
here warns (DeprecationWarning) and gives the kit's."""

from __future__ import annotations

from cosmos_outbox._lazy import lazy_exports
from cosmos_outbox._renamed import MovedNames

__all__: list[str] = []
__getattr__, __dir__ = lazy_exports(__name__, {}, renamed=MovedNames("cosmos_outbox_testing"))
