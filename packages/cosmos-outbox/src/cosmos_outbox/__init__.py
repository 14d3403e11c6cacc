"""cosmos-outbox: the transactional outbox on Azure Cosmos DB and Service Bus, for Azure
Functions apps in Python.

An aggregate and the events its change recorded are written in one Cosmos DB transactional
batch; a change-feed trigger relays the events to a Service Bus topic with duplicate detection
(MessageId = event id, SessionId = aggregate id); event documents expire by TTL.

What an app uses is here, imported on first use (so importing the package costs little at a
Functions app's cold start); its tests use `cosmos_outbox.testing`. The adapters are grouped by
the service they speak to (`cosmos_outbox.cosmos`, `.servicebus`, `.blob`), the ports they
implement are `cosmos_outbox.ports`, the consuming side is `cosmos_outbox.subscriber`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cosmos_outbox._domain import Aggregate, DomainError, Event
    from cosmos_outbox._text import Text

__version__ = "0.2.0"

#: Each public name and the module that defines it.
_WHERE = {
    "Aggregate": "cosmos_outbox._domain",
    "DomainError": "cosmos_outbox._domain",
    "Event": "cosmos_outbox._domain",
    "Text": "cosmos_outbox._text",
}

__all__ = [
    "Aggregate",
    "DomainError",
    "Event",
    "Text",
    "__version__",
]


def __getattr__(name: str) -> Any:
    """The public names, imported when first used."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
