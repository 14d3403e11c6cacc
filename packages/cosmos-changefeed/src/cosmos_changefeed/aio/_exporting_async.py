"""A processor's lease state, exported and restored without a processor (aio): see
``cosmos_changefeed._exporting``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from azure.cosmos.aio import ContainerProxy

from cosmos_changefeed._checks import check_containers
from cosmos_changefeed._lease_state import LeaseState, export_flow, restore_flow
from cosmos_changefeed._options import check_processor_name
from cosmos_changefeed.aio._cosmos_store_async import CosmosLeaseStore
from cosmos_changefeed.aio._drive_async import drive
from cosmos_changefeed.aio._feed_async import CosmosFeedSource, FeedSource
from cosmos_changefeed.aio._store_async import LeaseStore


def _ports(
    monitored_container: ContainerProxy | FeedSource, lease_container: ContainerProxy | LeaseStore
) -> tuple[FeedSource, LeaseStore]:
    check_containers(monitored_container, lease_container, "aio", (FeedSource,), (LeaseStore,))
    reader = (
        monitored_container
        if isinstance(monitored_container, FeedSource)
        else CosmosFeedSource(monitored_container)
    )
    store = (
        lease_container
        if isinstance(lease_container, LeaseStore)
        else CosmosLeaseStore(lease_container)
    )
    return reader, store


async def export_leases(
    monitored_container: ContainerProxy | FeedSource,
    lease_container: ContainerProxy | LeaseStore,
    *,
    processor_name: str,
) -> LeaseState:
    """See ``cosmos_changefeed.export_leases``."""
    check_processor_name(processor_name)
    reader, store = _ports(monitored_container, lease_container)
    flow = export_flow(processor_name, reader.account_endpoint)
    return list(await drive(flow, store, reader, asyncio.sleep))


async def restore_leases(
    monitored_container: ContainerProxy | FeedSource,
    lease_container: ContainerProxy | LeaseStore,
    *,
    processor_name: str,
    state: Sequence[Mapping[str, Any]],
) -> int:
    """See ``cosmos_changefeed.restore_leases``."""
    check_processor_name(processor_name)
    reader, store = _ports(monitored_container, lease_container)
    flow = restore_flow(processor_name, reader.account_endpoint, state)
    return int(await drive(flow, store, reader, asyncio.sleep))
