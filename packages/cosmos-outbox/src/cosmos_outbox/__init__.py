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
    from cosmos_outbox._outbox import Outbox
    from cosmos_outbox._sync import AggregateService, Session, UnitOfWork
    from cosmos_outbox._text import Text
    from cosmos_outbox._wiring import Services
    from cosmos_outbox.errors import (
        AlreadyExistsError,
        IdempotencyKeyReusedError,
        NotFoundError,
        OutboxError,
        PreconditionFailedError,
        UnrecordedChangeError,
    )
    from cosmos_outbox.http import (
        AggregateRoutes,
        HttpApi,
        HttpCall,
        PathParameter,
        QueryParameter,
        Reply,
        RequestModel,
        View,
        view_of,
    )

__version__ = "0.3.0"

#: Each public name and the module that defines it.
_WHERE = {
    # aggregates and their events
    "Aggregate": "cosmos_outbox._domain",
    "DomainError": "cosmos_outbox._domain",
    "Event": "cosmos_outbox._domain",
    "Text": "cosmos_outbox._text",
    # the outbox and what it gives an app
    "Outbox": "cosmos_outbox._outbox",
    "Services": "cosmos_outbox._wiring",
    "AggregateService": "cosmos_outbox._sync",
    "UnitOfWork": "cosmos_outbox._sync",
    "Session": "cosmos_outbox._sync",
    # HTTP: the route helper, operations of an app's own, request and view models
    "AggregateRoutes": "cosmos_outbox.http",
    "HttpApi": "cosmos_outbox.http",
    "HttpCall": "cosmos_outbox.http",
    "PathParameter": "cosmos_outbox.http",
    "QueryParameter": "cosmos_outbox.http",
    "Reply": "cosmos_outbox.http",
    "RequestModel": "cosmos_outbox.http",
    "View": "cosmos_outbox.http",
    "view_of": "cosmos_outbox.http",
    # errors
    "OutboxError": "cosmos_outbox.errors",
    "NotFoundError": "cosmos_outbox.errors",
    "AlreadyExistsError": "cosmos_outbox.errors",
    "IdempotencyKeyReusedError": "cosmos_outbox.errors",
    "PreconditionFailedError": "cosmos_outbox.errors",
    "UnrecordedChangeError": "cosmos_outbox.errors",
}

__all__ = [
    "Aggregate",
    "AggregateRoutes",
    "AggregateService",
    "AlreadyExistsError",
    "DomainError",
    "Event",
    "HttpApi",
    "HttpCall",
    "IdempotencyKeyReusedError",
    "NotFoundError",
    "Outbox",
    "OutboxError",
    "PathParameter",
    "PreconditionFailedError",
    "QueryParameter",
    "Reply",
    "RequestModel",
    "Services",
    "Session",
    "Text",
    "UnitOfWork",
    "UnrecordedChangeError",
    "View",
    "__version__",
    "view_of",
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
