"""A processor's lease state, exported and restored without a processor (sync): what
``ChangeFeedProcessor.export_leases`` / ``restore_leases`` do, for a tool that has the two
containers and the processor's name but no handler to give (a backup job, a migration, a
troubleshooting script). The flows are ``_lease_state``'s, which the processors drive too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from azure.cosmos import ContainerProxy

from cosmos_changefeed._checks import check_containers
from cosmos_changefeed._cosmos_store import CosmosLeaseStore
from cosmos_changefeed._drive import drive
from cosmos_changefeed._feed import CosmosFeedSource
from cosmos_changefeed._lease_state import LeaseState, export_flow, restore_flow
from cosmos_changefeed._options import check_processor_name
from cosmos_changefeed._source import FeedSource
from cosmos_changefeed._store import LeaseStore


def _ports(
    monitored_container: ContainerProxy | FeedSource, lease_container: ContainerProxy | LeaseStore
) -> tuple[FeedSource, LeaseStore]:
    check_containers(monitored_container, lease_container, "sync", (FeedSource,), (LeaseStore,))
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


def _no_sleep(_seconds: float) -> None:
    return None


def export_leases(
    monitored_container: ContainerProxy | FeedSource,
    lease_container: ContainerProxy | LeaseStore,
    *,
    processor_name: str,
) -> LeaseState:
    """Processor ``processor_name``'s lease state on ``monitored_container``: its leases and
    ``.info`` as stored in ``lease_container``, without the service's fields -- a JSON-ready
    list (``ChangeFeedProcessor.export_leases``, without a processor)."""
    check_processor_name(processor_name)
    reader, store = _ports(monitored_container, lease_container)
    flow = export_flow(processor_name, reader.account_endpoint)
    return list(drive(flow, store, reader, _no_sleep))


def restore_leases(
    monitored_container: ContainerProxy | FeedSource,
    lease_container: ContainerProxy | LeaseStore,
    *,
    processor_name: str,
    state: Sequence[Mapping[str, Any]],
) -> int:
    """Put an exported lease state in ``lease_container``: the number of documents created.
    Refused when a document is not processor ``processor_name``'s on ``monitored_container``,
    or when the store holds its leases already (``ChangeFeedProcessor.restore_leases``,
    without a processor: make sure none of its instances runs)."""
    check_processor_name(processor_name)
    reader, store = _ports(monitored_container, lease_container)
    flow = restore_flow(processor_name, reader.account_endpoint, state)
    return int(drive(flow, store, reader, _no_sleep))
