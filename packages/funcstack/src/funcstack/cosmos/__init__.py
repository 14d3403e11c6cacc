"""The local Cosmos DB endpoint: ``@vercel/cosmosdb-server`` extended (``server.js``), which the
unmodified azure-cosmos SDK talks to over HTTPS. See docs/cosmos.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

from funcstack._lazy import lazy_exports

if TYPE_CHECKING:
    from funcstack.cosmos._control import (
        CosmosControlError,
        PhysicalPartition,
        merge_partitions,
        physical_partitions,
        split_partition,
    )
    from funcstack.cosmos._launcher import (
        EMULATOR_KEY,
        CosmosEndpoint,
        CosmosStartError,
        start_cosmos,
    )
    from funcstack.cosmos._tls import ADDRESS, LocalTls, local_tls

__all__ = [
    "ADDRESS",
    "EMULATOR_KEY",
    "CosmosControlError",
    "CosmosEndpoint",
    "CosmosStartError",
    "LocalTls",
    "PhysicalPartition",
    "local_tls",
    "merge_partitions",
    "physical_partitions",
    "split_partition",
    "start_cosmos",
]

# the public names, imported when first used (funcstack/_lazy.py)
__getattr__, __dir__ = lazy_exports(
    __name__,
    __all__,
    {
        "EMULATOR_KEY": "funcstack.cosmos._launcher",
        "CosmosEndpoint": "funcstack.cosmos._launcher",
        "CosmosStartError": "funcstack.cosmos._launcher",
        "start_cosmos": "funcstack.cosmos._launcher",
        "CosmosControlError": "funcstack.cosmos._control",
        "PhysicalPartition": "funcstack.cosmos._control",
        "merge_partitions": "funcstack.cosmos._control",
        "ADDRESS": "funcstack.cosmos._tls",
        "LocalTls": "funcstack.cosmos._tls",
        "local_tls": "funcstack.cosmos._tls",
        "physical_partitions": "funcstack.cosmos._control",
        "split_partition": "funcstack.cosmos._control",
    },
)
