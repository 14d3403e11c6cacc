"""Leases in a Cosmos DB container (aio), over azure-cosmos's ``aio.ContainerProxy`` (its
public API only). See ``cosmos_changefeed._cosmos_store``: the same requests, awaited."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from azure.core import MatchConditions
from azure.cosmos.aio import ContainerProxy
from azure.cosmos.exceptions import CosmosHttpResponseError

from cosmos_changefeed._cosmos_store import (
    LIST_QUERY,
    partition_key_path_of,
    translated_error,
    ttl_on,
)
from cosmos_changefeed.aio._resources_async import read_properties
from cosmos_changefeed.aio._store_async import LeaseStore


class CosmosLeaseStore(LeaseStore):
    """The lease documents of ``container`` (a lease container any number of processors share,
    each under its own prefix)."""

    def __init__(self, container: ContainerProxy) -> None:
        self.container = container
        self._properties: dict[str, Any] | None = None

    async def _read(self) -> dict[str, Any]:
        if self._properties is None:
            self._properties = await read_properties(self.container, "lease container")
        return self._properties

    async def partition_key_path(self) -> str:
        return partition_key_path_of(await self._read())

    async def expires_documents(self) -> bool:
        """Whether the container has TTL on (``defaultTtl`` set), so a ``ttl`` is honoured."""
        return ttl_on(await self._read())

    async def list_documents(self, prefix: str) -> list[dict[str, Any]]:
        return [
            dict(item)
            async for item in self.container.query_items(
                LIST_QUERY, parameters=[{"name": "@prefix", "value": prefix}]
            )
        ]

    async def read(self, item_id: str, partition_key: str) -> dict[str, Any] | None:
        try:
            return dict(await self.container.read_item(item_id, partition_key=partition_key))
        except CosmosHttpResponseError as exc:
            if exc.status_code == 404:
                return None
            raise

    async def create(
        self, document: Mapping[str, Any], partition_key: str
    ) -> dict[str, Any] | None:
        try:
            return dict(await self.container.create_item(dict(document)))
        except CosmosHttpResponseError as exc:
            if exc.status_code == 409:
                return None
            raise

    async def replace(
        self, document: Mapping[str, Any], partition_key: str, etag: str | None
    ) -> dict[str, Any]:
        conditions: dict[str, Any] = (
            {"etag": etag, "match_condition": MatchConditions.IfNotModified} if etag else {}
        )
        try:
            replaced = await self.container.replace_item(
                str(document["id"]), dict(document), **conditions
            )
        except CosmosHttpResponseError as exc:
            raise translated_error(exc) from None
        return dict(replaced)

    async def delete(self, item_id: str, partition_key: str, etag: str | None = None) -> bool:
        conditions: dict[str, Any] = (
            {"etag": etag, "match_condition": MatchConditions.IfNotModified} if etag else {}
        )
        try:
            await self.container.delete_item(item_id, partition_key=partition_key, **conditions)
        except CosmosHttpResponseError as exc:
            if exc.status_code in {404, 412}:
                return False
            raise
        return True
