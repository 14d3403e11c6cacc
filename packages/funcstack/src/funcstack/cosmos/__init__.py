"""The local Cosmos DB endpoint: ``@vercel/cosmosdb-server`` extended (``server.js``), which the
unmodified azure-cosmos SDK talks to over HTTPS. See docs/cosmos.md."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from funcstack.cosmos._control import (
        CosmosControlError,
        PhysicalPartition,
        physical_partitions,
        split_partition,
    )
    from funcstack.cosmos._launcher import (
        EMULATOR_KEY,
        CosmosEndpoint,
        CosmosStartError,
        start_cosmos,
    )

__all__ = [
    "EMULATOR_KEY",
    "CosmosControlError",
    "CosmosEndpoint",
    "CosmosStartError",
    "PhysicalPartition",
    "physical_partitions",
    "split_partition",
    "start_cosmos",
]

_WHERE = {
    "EMULATOR_KEY": "funcstack.cosmos._launcher",
    "CosmosEndpoint": "funcstack.cosmos._launcher",
    "CosmosStartError": "funcstack.cosmos._launcher",
    "start_cosmos": "funcstack.cosmos._launcher",
    "CosmosControlError": "funcstack.cosmos._control",
    "PhysicalPartition": "funcstack.cosmos._control",
    "physical_partitions": "funcstack.cosmos._control",
    "split_partition": "funcstack.cosmos._control",
}


def __getattr__(name: str) -> Any:
    """The public names, imported when first used (the worker and the pytest plugin
    import this package: they pay only for what they use)."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
