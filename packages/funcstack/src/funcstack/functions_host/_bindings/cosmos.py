"""Cosmos DB input and output bindings, as the Cosmos DB extension 4.x serves them to a script
worker (Azure/azure-webjobs-sdk-extensions, ``src/WebJobs.Extensions.CosmosDB``:
``CosmosDBExtensionConfigProvider``, ``CosmosDBItemValueBinder``, ``CosmosDBEnumerableBuilder``,
``CosmosDBAsyncCollector``, ``CosmosDBSqlResolutionPolicy``, ``CosmosDBUtility``; "Azure Cosmos
DB input/output binding for Azure Functions 2.x and higher" on learn.microsoft.com):

* ``databaseName``, ``containerName`` (``{...}`` resolved per invocation); ``connection``: a
  Cosmos DB connection (``_connections``: a connection string, or
  ``<connection>__accountEndpoint``). The 3.x extension's names (``collectionName``,
  ``connectionStringSetting``) are refused: a v2 Python app gets the 4.x extension.
* Input by ``id`` (``{...}`` resolved): one document read with ``partitionKey`` (a string; when
  it is not given, ``PartitionKey.None``, the documents without a partition key value, as the
  extension reads; the docs say it is required for partitioned containers); a document that
  does not exist is null (the function gets ``None``).
* Input by ``sqlQuery``: each ``{name}`` becomes the SQL parameter ``@name`` with the binding
  data's value (never text in the query); ``partitionKey`` narrows the query to one partition;
  the documents as a JSON array. With neither ``id`` nor ``sqlQuery``: every document of the
  container. Both ``id`` and ``sqlQuery``: the extension has no binding for that: refused.
* Documents reach the worker as the extension's Newtonsoft reading leaves them (date-like
  strings re-formatted, ``_newtonsoft``), or verbatim with the local-only setting
  ``FUNCTIONS_HOST_COSMOS_VERBATIM_DOCUMENTS=true``, as the trigger's.
* Output (``IAsyncCollector<JObject>``): each JSON object of the value upserted, one after the
  other (a list is one upsert per element; an item that is not an object fails, as the
  extension's null item does). A container (or database) that does not exist: with
  ``createIfNotExists`` both are created (``partitionKey`` is the new container's partition key
  path, ``containerThroughput`` its throughput; without ``partitionKey`` the .NET SDK refuses
  to create it, and so does funcstack) and the upsert retried; without, the invocation fails
  with the extension's message. ``preferredLocations`` is accepted and has no effect (one
  local region).
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

from azure.cosmos import PartitionKey
from azure.cosmos.exceptions import CosmosHttpResponseError, CosmosResourceExistsError
from azure.cosmos.partition_key import NonePartitionKeyValue

from funcstack.functions_host._bindings.base import BindingError, BindingRefusedError, ClientBinding
from funcstack.functions_host._bindings.expressions import ExpressionError, Template
from funcstack.functions_host._bindings.values import (
    BindingValueError,
    collector_jobject,
    to_typed_data,
)
from funcstack.functions_host._config import is_truthy
from funcstack.functions_host._newtonsoft import VERBATIM_SETTING, host_documents, host_time_zone

if TYPE_CHECKING:
    from funcstack.functions_host._bindings.base import BindingDecl, BindingEnv
    from funcstack.functions_host._bindings.expressions import BindingData
    from funcstack.functions_host._bindings.values import HostValue

__all__ = ["CosmosInput", "CosmosOutput"]

DEFAULT_CONNECTION = "CosmosDB"
_LEGACY = {
    "collectionname": "containerName",
    "connectionstringsetting": "connection",
    "leasecollectionname": "leaseContainerName",
}


class _CosmosBinding(ClientBinding):
    kind = "cosmos"
    default_connection = DEFAULT_CONNECTION

    def __init__(self, decl: BindingDecl, env: BindingEnv) -> None:
        for legacy, current in _LEGACY.items():
            if legacy in decl.props:
                raise BindingRefusedError(
                    f"'{decl.raw.get(legacy, legacy)}' is the Cosmos DB extension 3.x's name; "
                    f"a v2 Python app gets the 4.x extension, which reads '{current}'"
                )
        super().__init__(decl, env)
        self._database = decl.template("databaseName")
        self._container = decl.template("containerName")
        if not self._database.source or not self._container.source:
            raise BindingRefusedError(
                "a Cosmos DB binding needs 'databaseName' and 'containerName'"
            )

    def _names(self, data: BindingData) -> tuple[str, str]:
        return self._database.bind(data), self._container.bind(data)

    def _container_client(self, database: str, container: str) -> Any:
        client = self._env.clients.cosmos(self._connection)
        return client.get_database_client(database).get_container_client(container)


class CosmosInput(_CosmosBinding):
    """``[CosmosDB(...)]`` read: one document by id, or the documents of a query."""

    def __init__(self, decl: BindingDecl, env: BindingEnv) -> None:
        super().__init__(decl, env)
        self._id: Template | None = decl.template("id") if decl.text("id") else None
        self._query: Template | None = decl.template("sqlQuery") if decl.text("sqlQuery") else None
        self._partition_key: Template | None = (
            decl.template("partitionKey") if decl.get("partitionKey") is not None else None
        )
        if self._id is not None and self._query is not None:
            raise BindingRefusedError(
                "'id' and 'sqlQuery' together: the extension binds one document by id, or the "
                "documents of a query, not both"
            )

    async def read(self, data: BindingData) -> Any:
        try:
            database, container = self._names(data)
            item_id = self._id.bind(data) if self._id is not None else None
            partition_key = (
                self._partition_key.bind(data) if self._partition_key is not None else None
            )
            query = self._query.bind_sql(data) if self._query is not None else None
        except ExpressionError as exc:
            raise BindingError(f"Exception binding parameter '{self.name}': {exc}") from None
        client = self._container_client(database, container)
        try:
            if item_id is not None:
                found = await self._read_item(client, item_id, partition_key)
                return to_typed_data(None if found is None else self._documents(found))
            text, parameters = query if query is not None else ("SELECT * FROM c", [])
            options: dict[str, Any] = (
                {"partition_key": partition_key} if partition_key is not None else {}
            )
            items = [
                dict(item)
                async for item in client.query_items(text, parameters=parameters, **options)
            ]
        except CosmosHttpResponseError as exc:
            raise BindingError(
                f"Exception binding parameter '{self.name}': Cosmos DB {database}/{container}: "
                f"{exc.status_code} {exc.message}"
            ) from None
        return to_typed_data(self._documents(items))

    @staticmethod
    async def _read_item(client: Any, item_id: str, partition_key: str | None) -> Any:
        key: Any = NonePartitionKeyValue if partition_key is None else partition_key
        try:
            return dict(await client.read_item(item_id, partition_key=key))
        except CosmosHttpResponseError as exc:
            if exc.status_code == 404:  # the document, or its container: null
                return None
            raise

    @staticmethod
    def _documents(value: Any) -> Any:
        if is_truthy(os.environ.get(VERBATIM_SETTING, "false")):
            return value
        return host_documents(value, host_time_zone(dict(os.environ)))


class CosmosOutput(_CosmosBinding):
    """``[CosmosDB(...)] IAsyncCollector<JObject>``: upsert each document."""

    def __init__(self, decl: BindingDecl, env: BindingEnv) -> None:
        super().__init__(decl, env)
        self._create = decl.flag("createIfNotExists")
        self._partition_key_path = decl.text("partitionKey") or None
        throughput = decl.get("containerThroughput")
        try:
            self._throughput = int(throughput) if throughput not in (None, "") else 0
        except ValueError:
            raise BindingRefusedError(
                f"containerThroughput {throughput!r} is not a number"
            ) from None

    async def write(self, value: HostValue, data: BindingData) -> None:
        try:
            database, container = self._names(data)
            documents = collector_jobject(value)
        except (ExpressionError, BindingValueError) as exc:
            raise BindingError(f"output '{self.name}' (cosmosDB): {exc}") from None
        client = self._container_client(database, container)
        for document in documents:
            try:
                try:
                    await client.upsert_item(document)
                except CosmosHttpResponseError as exc:
                    if exc.status_code != 404:
                        raise
                    if not self._create:
                        raise BindingError(
                            f"output '{self.name}' (cosmosDB): The container '{container}' (in "
                            f"database '{database}') does not exist. To automatically create "
                            "the container, set 'CreateIfNotExists' to 'true'."
                        ) from None
                    client = await self._create_container(database, container)
                    await client.upsert_item(document)
            except CosmosHttpResponseError as exc:
                raise BindingError(
                    f"output '{self.name}' (cosmosDB {database}/{container}): "
                    f"{exc.status_code} {exc.message}"
                ) from None

    async def _create_container(self, database: str, container: str) -> Any:
        """``CosmosDBUtility.CreateDatabaseAndCollectionIfNotExistAsync``."""
        if not self._partition_key_path:
            raise BindingError(
                f"output '{self.name}' (cosmosDB): creating container '{container}': Value "
                "cannot be null. (Parameter 'PartitionKey'): give the binding a partitionKey "
                "path to create the container with"
            )
        client = self._env.clients.cosmos(self._connection)
        db = await client.create_database_if_not_exists(database)
        with contextlib.suppress(CosmosResourceExistsError):
            await db.create_container(
                container,
                partition_key=PartitionKey(path=self._partition_key_path),
                offer_throughput=self._throughput or None,
            )
        return db.get_container_client(container)
