"""cosmos-outbox: the transactional outbox on Azure Cosmos DB and Service Bus, for Azure
Functions apps in Python.

Your documents and the events that tell of the change are written in one Cosmos DB
transactional batch (a `Transaction`, `Outbox.transaction`); a change-feed trigger relays the
events to a Service Bus topic with duplicate detection (MessageId = event id, SessionId = the
transaction's session id or the aggregate's id); event documents expire by TTL.

This namespace is the outbox's, and only the outbox's: what an app that writes its own documents
and relays their events uses, imported on first use (so importing the package costs little at a
Functions app's cold start: `cosmos_outbox._lazy`). The building blocks are namespaces of their
own (`cosmos_outbox.aggregates`: aggregates and their unit of work; `cosmos_outbox.http`: the
route helper and the HTTP toolkit), and so is the test kit (`cosmos_outbox.testing`); the
adapters are grouped by the service they speak to (`.cosmos`, `.servicebus`, `.blob`), the ports
they implement are `.ports`, the consuming side is `.subscriber`. What each part promises under
semantic versioning: the README's "The package's shape".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosmos_outbox._lazy import lazy_exports

if TYPE_CHECKING:  # what type checkers read; at run time: `_EXPORTS`
    from cosmos_outbox._outbox import Outbox as Outbox
    from cosmos_outbox._wiring import Services as Services
    from cosmos_outbox._write.sync import Transaction as Transaction
    from cosmos_outbox.errors import AlreadyExistsError as AlreadyExistsError
    from cosmos_outbox.errors import BatchTooLargeError as BatchTooLargeError
    from cosmos_outbox.errors import IdempotencyKeyReusedError as IdempotencyKeyReusedError
    from cosmos_outbox.errors import NotFoundError as NotFoundError
    from cosmos_outbox.errors import OutboxError as OutboxError
    from cosmos_outbox.errors import PreconditionFailedError as PreconditionFailedError

#: Its pyproject.toml's version (tests/repository/test_versions.py holds them equal; a literal,
#: not importlib.metadata's: no file read at import).
__version__ = "0.5.0"

#: Each public name and the module that defines it.
_EXPORTS = {
    # the outbox, and the transaction: your documents and events in one batch
    "Outbox": "cosmos_outbox._outbox",
    "Transaction": "cosmos_outbox._write.sync",
    "Services": "cosmos_outbox._wiring",
    # what a commit may raise
    "OutboxError": "cosmos_outbox.errors",
    "NotFoundError": "cosmos_outbox.errors",
    "AlreadyExistsError": "cosmos_outbox.errors",
    "PreconditionFailedError": "cosmos_outbox.errors",
    "IdempotencyKeyReusedError": "cosmos_outbox.errors",
    "BatchTooLargeError": "cosmos_outbox.errors",
}

#: Names of 0.3 that moved, kept here until 0.5 (DeprecationWarning naming the new place): the
#: building blocks have namespaces of their own, and "session" is Service Bus's word.
_MOVED = {
    "Session": "cosmos_outbox.Transaction",
    **{
        name: f"cosmos_outbox.aggregates.{name}"
        for name in (
            "Aggregate",
            "AggregateService",
            "DomainError",
            "Event",
            "Text",
            "UnitOfWork",
            "UnrecordedChangeError",
        )
    },
    **{
        name: f"cosmos_outbox.http.{name}"
        for name in (
            "AggregateRoutes",
            "HttpApi",
            "HttpCall",
            "PathParameter",
            "QueryParameter",
            "Reply",
            "RequestModel",
            "View",
            "view_of",
        )
    },
}

__all__ = [*_EXPORTS, "__version__"]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, renamed=_MOVED)
