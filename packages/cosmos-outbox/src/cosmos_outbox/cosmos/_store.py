"""The outbox's container on Cosmos DB: `cosmos_outbox.ports.DocumentStore` on the SDK's sync
`ContainerProxy`, and `AsyncDocumentStore` on its `aio` one. Each method is one SDK call (or a
paged query) with its failures translated once (`cosmos_errors`); what is built from or read
into documents is the same for both (this module's functions).

The container's partition key may be any single path (`/partitionKey`, `/tenantId`,
`/customer/id`): the outbox's own documents (events, sequences, claims) carry their partition in
`partitionKey`, and a written document without a value at the container's path (the app's own,
or the outbox's in a container on another path) gets that partition there. The path is read
from the container once, on the first write (or given)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from azure.core import MatchConditions
from azure.cosmos import ContainerProxy
from azure.cosmos.aio import ContainerProxy as AsyncContainerProxy

from cosmos_changefeed import read_again_on_headers_race
from cosmos_outbox._queries import QueryParameters, sdk_parameters
from cosmos_outbox.cosmos._errors import cosmos_errors, query_errors, raise_translated
from cosmos_outbox.errors import NotFoundError, OutboxError, StoreUnavailableError
from cosmos_outbox.ports import AsyncDocumentStore, BatchOperation, DocumentStore, Page

#: The id of a document that never exists: health reads it (1 RU).
_PROBE = "health-probe"
#: Documents of a type (served by the indexed /type path), in a partition when given.
_OF_TYPE = "SELECT * FROM c WHERE c.type = @type"
_FIND = "SELECT * FROM c WHERE c.type = @type AND c.id = @id"
logger = logging.getLogger("cosmos_outbox.cosmos")
#: A container's partition key path, as segments (`/customer/id`: `("customer", "id")`).
KeyPath: TypeAlias = tuple[str, ...]


def key_path(properties: Mapping[str, Any]) -> KeyPath:
    """The container's partition key path (from its properties) as segments (`/partitionKey`:
    `("partitionKey",)`). A hierarchical key, or a path with escaped segments, is refused,
    naming the container and its paths."""
    definition = properties.get("partitionKey") or {}
    paths = [str(path) for path in definition.get("paths") or []]
    if len(paths) != 1 or definition.get("kind", "Hash") != "Hash" or '"' in paths[0]:
        raise OutboxError(
            f"container {properties.get('id')!r}: its partition key ({', '.join(paths)}, kind "
            f"{definition.get('kind')}) is not one the outbox can write to: give it a single "
            "path (hierarchical partition keys are not supported)"
        )
    return tuple(paths[0].strip("/").split("/"))


def container_key_path(properties: Mapping[str, Any]) -> KeyPath:
    """`key_path` of a container read from the service, and a warning when its time to live is
    off: Cosmos DB then ignores the event documents' `ttl` and keeps relayed events for ever."""
    if properties.get("defaultTtl") is None:
        logger.warning(
            "container %s has time to live off: relayed events are never deleted "
            "(set its defaultTtl to -1)",
            properties.get("id"),
            extra={"outbox.container": properties.get("id")},
        )
    return key_path(properties)


def keyed(document: Mapping[str, Any], path: KeyPath, partition_key: object) -> dict[str, Any]:
    """A copy of `document` with `partition_key` at `path` when it has no value there (nested
    objects on the way are copied, never the caller's changed)."""
    copy = dict(document)
    if not path or partition_key is None:
        return copy
    node = copy
    for segment in path[:-1]:
        child = node.get(segment)
        node[segment] = child = dict(child) if isinstance(child, Mapping) else {}
        node = child
    node.setdefault(path[-1], partition_key)
    return copy


def sdk_operations(
    operations: Sequence[BatchOperation],
    path: KeyPath = ("partitionKey",),
    partition_key: str | None = None,
) -> list[tuple[Any, ...]]:
    """A batch in the SDK's shape (`execute_item_batch(batch_operations=...)`), its documents
    carrying the partition at the container's `path`: a document that has a value there is
    given as it is (the SDK only reads it), another is `keyed`."""
    top = path[0] if len(path) == 1 else None
    converted: list[tuple[Any, ...]] = []
    for op in operations:
        kind, document = op.kind, op.document
        if document is not None and (top is None or top not in document):
            document = keyed(document, path, partition_key)
        if kind == "create" or kind == "upsert":  # the common case first, no options
            converted.append((kind, (document if document is not None else {},)))
            continue
        options = {"if_match_etag": op.if_match} if op.if_match else {}
        match kind:
            case "replace":
                converted.append(
                    ("replace", (op.document_id, document if document is not None else {}), options)
                )
            case "patch":
                converted.append(("patch", (op.id, [dict(p) for p in op.patch]), options))
            case "delete":
                converted.append(("delete", (op.id,), options))
    return converted


def batch_etags(results: Sequence[Mapping[str, Any]]) -> list[str | None]:
    """The etag each operation of a batch left (None for a delete)."""
    return [
        str(etag)
        if (etag := result.get("eTag") or (result.get("resourceBody") or {}).get("_etag"))
        else None
        for result in results
    ]


def _row(result: Any) -> Any:
    """A query's result as the store gives it: a document or projection as a plain dict, a
    value (`SELECT VALUE`) as it is."""
    return dict(result) if isinstance(result, Mapping) else result


def _query_options(parameters: QueryParameters, partition_key: str | None) -> dict[str, Any]:
    """`query_items`' options for an app's query: its parameters, and its partition (none:
    across partitions)."""
    options: dict[str, Any] = {"parameters": sdk_parameters(parameters)}
    if partition_key is not None:
        options["partition_key"] = partition_key
    return options


def _parameters(type_: str, document_id: str | None = None) -> list[dict[str, object]]:
    found: list[dict[str, object]] = [{"name": "@type", "value": type_}]
    if document_id is not None:
        found.append({"name": "@id", "value": document_id})
    return found


class CosmosDocumentStore(DocumentStore):
    """The container (sync SDK). One per process: the client pools connections.
    `partition_key_path`: the container's (read from it on the first write when not given)."""

    def __init__(self, container: ContainerProxy, *, partition_key_path: str | None = None) -> None:
        self.container = container
        self._path: KeyPath | None = (
            None
            if partition_key_path is None
            else key_path({"id": container.id, "partitionKey": {"paths": [partition_key_path]}})
        )

    def key_path(self) -> KeyPath:
        if self._path is None:
            try:
                with cosmos_errors():
                    self._path = container_key_path(self.container.read())
            except NotFoundError:
                raise _missing() from None
        return self._path

    def execute_batch(
        self, partition_key: str, operations: Sequence[BatchOperation]
    ) -> list[str | None]:
        path = self._path or self.key_path()
        try:
            results = self.container.execute_item_batch(
                batch_operations=sdk_operations(operations, path, partition_key),
                partition_key=partition_key,
            )
        except Exception as exc:
            raise_translated(exc, "document", partition_key)
        return batch_etags(results)

    def read(self, partition_key: str, document_id: str) -> dict[str, Any] | None:
        try:
            with cosmos_errors():
                return dict(self.container.read_item(item=document_id, partition_key=partition_key))
        except NotFoundError:
            return None

    def upsert(self, document: Mapping[str, Any]) -> dict[str, Any]:
        path = self.key_path()
        with cosmos_errors():
            return dict(
                self.container.upsert_item(keyed(document, path, document.get("partitionKey")))
            )

    def replace(
        self, document: Mapping[str, Any], *, if_match: str | None = None
    ) -> dict[str, Any]:
        path = self.key_path()
        with cosmos_errors("document", str(document["id"])):
            return dict(
                self.container.replace_item(
                    str(document["id"]),
                    keyed(document, path, document.get("partitionKey")),
                    etag=if_match,
                    match_condition=_match(if_match),
                )
            )

    def delete(self, partition_key: str, document_id: str) -> None:
        with cosmos_errors("document", document_id):
            self.container.delete_item(document_id, partition_key=partition_key)

    def find(self, type_: str, document_id: str) -> dict[str, Any] | None:
        with cosmos_errors():
            found = read_again_on_headers_race(
                lambda: list(
                    self.container.query_items(
                        _FIND,
                        parameters=_parameters(type_, document_id),
                        enable_cross_partition_query=True,
                    )
                )
            )
        return dict(found[0]) if found else None

    def of_type(self, type_: str, *, partition_key: str | None = None) -> list[dict[str, Any]]:
        scope: dict[str, Any] = (
            {"enable_cross_partition_query": True}
            if partition_key is None
            else {"partition_key": partition_key}
        )
        with cosmos_errors():
            return read_again_on_headers_race(
                lambda: [
                    dict(d)
                    for d in self.container.query_items(
                        _OF_TYPE, parameters=_parameters(type_), **scope
                    )
                ]
            )

    def page_of_type(
        self, type_: str, *, page_size: int, continuation: str | None
    ) -> Page[dict[str, Any]]:
        rows, token = query_page(
            self.container, _OF_TYPE, page_size, continuation, parameters=_parameters(type_)
        )
        return Page(rows, token)

    def query(
        self, query: str, parameters: QueryParameters = None, *, partition_key: str | None = None
    ) -> list[Any]:
        options = _query_options(parameters, partition_key)
        if partition_key is None:
            options["enable_cross_partition_query"] = True
        with query_errors():
            return read_again_on_headers_race(
                lambda: [_row(r) for r in self.container.query_items(query, **options)]
            )

    def query_page(
        self,
        query: str,
        parameters: QueryParameters = None,
        *,
        partition_key: str | None = None,
        page_size: int,
        continuation: str | None = None,
    ) -> Page[Any]:
        rows, token = query_page(
            self.container,
            query,
            page_size,
            continuation,
            errors=query_errors(continued=continuation is not None),
            **_query_options(parameters, partition_key),
        )
        return Page(rows, token)

    def ping(self) -> None:
        """A 1-RU point read of a document that does not exist: "not found" means the store
        answered. A missing container answers "not found" too (the SDK reads the container's
        properties first), so a "not found" is checked with a read of the container: if it is
        missing, the store is unavailable, not healthy."""
        if self.read(_PROBE, _PROBE) is None:
            try:
                with cosmos_errors():
                    self.container.read()
            except NotFoundError:
                raise _missing() from None


class AsyncCosmosDocumentStore(AsyncDocumentStore):
    """The container (the SDK's `aio` client). One per process and event loop.
    `partition_key_path`: the container's (read from it on the first write when not given)."""

    def __init__(
        self, container: AsyncContainerProxy, *, partition_key_path: str | None = None
    ) -> None:
        self.container = container
        self._path: KeyPath | None = (
            None
            if partition_key_path is None
            else key_path({"id": container.id, "partitionKey": {"paths": [partition_key_path]}})
        )

    async def key_path(self) -> KeyPath:
        if self._path is None:
            try:
                with cosmos_errors():
                    self._path = container_key_path(await self.container.read())
            except NotFoundError:
                raise _missing() from None
        return self._path

    async def execute_batch(
        self, partition_key: str, operations: Sequence[BatchOperation]
    ) -> list[str | None]:
        path = self._path or await self.key_path()
        try:
            results = await self.container.execute_item_batch(
                batch_operations=sdk_operations(operations, path, partition_key),
                partition_key=partition_key,
            )
        except Exception as exc:
            raise_translated(exc, "document", partition_key)
        return batch_etags(results)

    async def read(self, partition_key: str, document_id: str) -> dict[str, Any] | None:
        try:
            with cosmos_errors():
                return dict(
                    await self.container.read_item(item=document_id, partition_key=partition_key)
                )
        except NotFoundError:
            return None

    async def upsert(self, document: Mapping[str, Any]) -> dict[str, Any]:
        path = await self.key_path()
        with cosmos_errors():
            return dict(
                await self.container.upsert_item(
                    keyed(document, path, document.get("partitionKey"))
                )
            )

    async def replace(
        self, document: Mapping[str, Any], *, if_match: str | None = None
    ) -> dict[str, Any]:
        path = await self.key_path()
        with cosmos_errors("document", str(document["id"])):
            return dict(
                await self.container.replace_item(
                    str(document["id"]),
                    keyed(document, path, document.get("partitionKey")),
                    etag=if_match,
                    match_condition=_match(if_match),
                )
            )

    async def delete(self, partition_key: str, document_id: str) -> None:
        with cosmos_errors("document", document_id):
            await self.container.delete_item(document_id, partition_key=partition_key)

    async def find(self, type_: str, document_id: str) -> dict[str, Any] | None:
        with cosmos_errors():
            found = [
                d
                async for d in self.container.query_items(
                    _FIND, parameters=_parameters(type_, document_id)
                )
            ]
        return dict(found[0]) if found else None

    async def of_type(
        self, type_: str, *, partition_key: str | None = None
    ) -> list[dict[str, Any]]:
        with cosmos_errors():
            if partition_key is not None:
                return [
                    dict(d)
                    async for d in self.container.query_items(
                        _OF_TYPE, parameters=_parameters(type_), partition_key=partition_key
                    )
                ]
            return [
                dict(d)
                async for d in self.container.query_items(_OF_TYPE, parameters=_parameters(type_))
            ]

    async def page_of_type(
        self, type_: str, *, page_size: int, continuation: str | None
    ) -> Page[dict[str, Any]]:
        rows, token = await async_query_page(
            self.container, _OF_TYPE, page_size, continuation, parameters=_parameters(type_)
        )
        return Page(rows, token)

    async def query(
        self, query: str, parameters: QueryParameters = None, *, partition_key: str | None = None
    ) -> list[Any]:
        with query_errors():
            return [
                _row(r)
                async for r in self.container.query_items(
                    query, **_query_options(parameters, partition_key)
                )
            ]

    async def query_page(
        self,
        query: str,
        parameters: QueryParameters = None,
        *,
        partition_key: str | None = None,
        page_size: int,
        continuation: str | None = None,
    ) -> Page[Any]:
        rows, token = await async_query_page(
            self.container,
            query,
            page_size,
            continuation,
            errors=query_errors(continued=continuation is not None),
            **_query_options(parameters, partition_key),
        )
        return Page(rows, token)

    async def ping(self) -> None:
        if await self.read(_PROBE, _PROBE) is None:
            try:
                with cosmos_errors():
                    await self.container.read()
            except NotFoundError:
                raise _missing() from None


def _match(if_match: str | None) -> MatchConditions | None:
    return MatchConditions.IfNotModified if if_match else None


def _missing() -> StoreUnavailableError:
    return StoreUnavailableError("the database or container does not exist", retry_after=30.0)


def query_page(
    container: ContainerProxy,
    query: str,
    page_size: int,
    continuation: str | None,
    *,
    errors: cosmos_errors | None = None,
    **options: Any,
) -> tuple[list[Any], str | None]:
    """One page of a cross-partition query and the token of the next (None: last), failures
    translated (`cosmos_outbox.errors`). `options` go to `query_items` (`parameters`, ...).

    The token is read from this query's own response headers. The SDK pager's
    `continuation_token` reads the client's last response headers instead, and those belong to
    whichever request on the client finished last. With requests on other threads (an app
    serves concurrent invocations on one client), that can be another request's, for example
    a point read's etag. A client then pages with a token that was never this query's.

    `errors`: how failures are translated (`cosmos_errors()` unless given)."""

    def page() -> tuple[list[Any], Any]:
        paged = container.query_items(
            query, enable_cross_partition_query=True, max_item_count=page_size, **options
        )
        rows: list[Any] = [_row(d) for d in next(paged.by_page(continuation), [])]
        return rows, paged.get_response_headers().get("x-ms-continuation")

    with errors or cosmos_errors():
        rows, token = read_again_on_headers_race(page)
    return rows, str(token) if token else None


async def async_query_page(
    container: AsyncContainerProxy,
    query: str,
    page_size: int,
    continuation: str | None,
    *,
    errors: cosmos_errors | None = None,
    **options: Any,
) -> tuple[list[Any], str | None]:
    """`query_page` on the SDK's `aio` container (its queries are cross-partition unless
    `options` name a partition key)."""
    with errors or cosmos_errors():
        paged = container.query_items(query, max_item_count=page_size, **options)
        rows: list[Any] = []
        async for page in paged.by_page(continuation):
            rows = [_row(d) async for d in page]
            break
        token = paged.get_response_headers().get("x-ms-continuation")
    return rows, str(token) if token else None
