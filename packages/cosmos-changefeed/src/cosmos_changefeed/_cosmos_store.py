"""Leases in a Cosmos DB container (sync): the lease store the processor uses in production,
over azure-cosmos's ``ContainerProxy`` (its public API only).

As .NET's ``DocumentServiceLeaseStoreManagerBuilder`` wants it: the container partitioned on
``/id`` or ``/partitionKey`` (another path is refused when the processor starts); every update a
``replace`` conditioned on the etag (``If-Match``), the service answering 412 when it changed;
a listing by prefix is the query .NET's ``DocumentServiceLeaseContainerCosmos`` sends
(``SELECT * FROM c WHERE STARTSWITH(c.id, ...)``, across partitions). A ``.lock`` document's
``ttl`` expires it only in a container with TTL on (``default_ttl=-1``), as in .NET.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from azure.core import MatchConditions
from azure.cosmos import ContainerProxy
from azure.cosmos.exceptions import CosmosHttpResponseError

from cosmos_changefeed._resources import read_properties
from cosmos_changefeed._shared_headers import read_again_on_headers_race
from cosmos_changefeed._store import (
    ConflictError,
    LeaseStore,
    NotFoundError,
    PreconditionFailedError,
    check_partition_key_path,
)

LIST_QUERY = "SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)"


class CosmosLeaseStore(LeaseStore):
    """The lease documents of ``container`` (a lease container any number of processors share,
    each under its own prefix)."""

    def __init__(self, container: ContainerProxy) -> None:
        self.container = container
        self._properties: dict[str, Any] | None = None

    def _read(self) -> dict[str, Any]:
        if self._properties is None:
            self._properties = read_properties(self.container, "lease container")
        return self._properties

    def partition_key_path(self) -> str:
        return partition_key_path_of(self._read())

    def expires_documents(self) -> bool:
        """Whether the container has TTL on (``defaultTtl`` set), so a ``ttl`` is honoured."""
        return ttl_on(self._read())

    def list_documents(self, prefix: str) -> list[dict[str, Any]]:
        def listing() -> list[dict[str, Any]]:
            return [
                dict(item)
                for item in self.container.query_items(
                    LIST_QUERY,
                    parameters=[{"name": "@prefix", "value": prefix}],
                    enable_cross_partition_query=True,
                )
            ]

        return read_again_on_headers_race(listing, what="the lease listing")

    def read(self, item_id: str, partition_key: str) -> dict[str, Any] | None:
        try:
            return dict(self.container.read_item(item_id, partition_key=partition_key))
        except CosmosHttpResponseError as exc:
            if exc.status_code == 404:
                return None
            raise

    def create(self, document: Mapping[str, Any], partition_key: str) -> dict[str, Any] | None:
        try:
            return dict(self.container.create_item(dict(document)))
        except CosmosHttpResponseError as exc:
            if exc.status_code == 409:
                return None
            raise

    def replace(
        self, document: Mapping[str, Any], partition_key: str, etag: str | None
    ) -> dict[str, Any]:
        conditions: dict[str, Any] = (
            {"etag": etag, "match_condition": MatchConditions.IfNotModified} if etag else {}
        )
        try:
            return dict(
                self.container.replace_item(str(document["id"]), dict(document), **conditions)
            )
        except CosmosHttpResponseError as exc:
            raise translated_error(exc) from None

    def delete(self, item_id: str, partition_key: str, etag: str | None = None) -> bool:
        conditions: dict[str, Any] = (
            {"etag": etag, "match_condition": MatchConditions.IfNotModified} if etag else {}
        )
        try:
            self.container.delete_item(item_id, partition_key=partition_key, **conditions)
        except CosmosHttpResponseError as exc:
            if exc.status_code in {404, 412}:
                return False
            raise
        return True


def partition_key_path_of(properties: dict[str, Any]) -> str:
    """A lease container's partition key path, from its properties (refused unless /id or
    /partitionKey)."""
    paths = list((properties.get("partitionKey") or {}).get("paths") or ["/id"])
    return check_partition_key_path(paths[0] if len(paths) == 1 else ",".join(paths))


def ttl_on(properties: dict[str, Any]) -> bool:
    """Whether a container expires documents with a ``ttl``: its ``defaultTtl`` is set (-1: on,
    no default)."""
    return properties.get("defaultTtl") is not None


def translated_error(exc: CosmosHttpResponseError) -> Exception:
    """A refused replace as the port's error (anything else as it came)."""
    if exc.status_code == 412:
        return PreconditionFailedError(str(exc.message))
    if exc.status_code == 404:
        return NotFoundError(str(exc.message))
    if exc.status_code == 409:
        return ConflictError(str(exc.message))
    return exc
