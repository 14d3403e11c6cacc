"""cosmos-changefeed: a change feed processor for Azure Cosmos DB.

Instances of one processor share a container's change feed through leases in a lease
container -- one per physical partition, in the .NET change feed processor's own schema, so
.NET's estimator and KEDA's ``azure-cosmosdb`` scaler read them and a .NET processor can take
over. Each batch of changes goes to a handler with its lease's context and is checkpointed once
the handler returns (at least once). ``cosmos_changefeed.aio`` has the same names for asyncio.
"""

from __future__ import annotations

from cosmos_changefeed._checkpoints import CheckpointPolicy
from cosmos_changefeed._checks import HandlerKindError
from cosmos_changefeed._continuation import Continuation
from cosmos_changefeed._cosmos_store import CosmosLeaseStore
from cosmos_changefeed._estimator import ChangeFeedEstimator
from cosmos_changefeed._exporting import export_leases, restore_leases
from cosmos_changefeed._feed import CosmosFeedSource
from cosmos_changefeed._lease_state import LeaseState
from cosmos_changefeed._leases import Lease
from cosmos_changefeed._manual import ManualCheckpointContext
from cosmos_changefeed._names import store_prefix as lease_prefix
from cosmos_changefeed._options import (
    Balancing,
    ChangeFeedProcessorState,
    During,
    EstimateFrom,
    FailedBatch,
    Failure,
    LeaseContext,
    Mode,
    PendingChanges,
    StartFrom,
)
from cosmos_changefeed._order import HeldBehindError, SetAsideChange
from cosmos_changefeed._processor import ChangeFeedProcessor, Handler, ManualCheckpointHandler
from cosmos_changefeed._protocol import LeaseLostError
from cosmos_changefeed._ranges import EpkRange, PartitionKeyRange
from cosmos_changefeed._reading import Page, Start
from cosmos_changefeed._resources import MissingResourceError
from cosmos_changefeed._retries import TransientError
from cosmos_changefeed._shared_headers import read_again_on_headers_race
from cosmos_changefeed._source import FeedSource
from cosmos_changefeed._store import (
    ConflictError,
    InMemoryDocuments,
    InMemoryLeaseStore,
    LeaseStore,
    LeaseStoreError,
    NotFoundError,
    PreconditionFailedError,
)

#: Its pyproject.toml's version (tests/repository/test_versions.py holds them equal; a literal,
#: not importlib.metadata's: no file read at import).
__version__ = "1.1.0"

__all__ = [
    "Balancing",
    "ChangeFeedEstimator",
    "ChangeFeedProcessor",
    "ChangeFeedProcessorState",
    "CheckpointPolicy",
    "ConflictError",
    "Continuation",
    "CosmosFeedSource",
    "CosmosLeaseStore",
    "During",
    "EpkRange",
    "EstimateFrom",
    "FailedBatch",
    "Failure",
    "FeedSource",
    "Handler",
    "HandlerKindError",
    "HeldBehindError",
    "InMemoryDocuments",
    "InMemoryLeaseStore",
    "Lease",
    "LeaseContext",
    "LeaseLostError",
    "LeaseState",
    "LeaseStore",
    "LeaseStoreError",
    "ManualCheckpointContext",
    "ManualCheckpointHandler",
    "MissingResourceError",
    "Mode",
    "NotFoundError",
    "Page",
    "PartitionKeyRange",
    "PendingChanges",
    "PreconditionFailedError",
    "SetAsideChange",
    "Start",
    "StartFrom",
    "TransientError",
    "__version__",
    "export_leases",
    "lease_prefix",
    "read_again_on_headers_race",
    "restore_leases",
]
