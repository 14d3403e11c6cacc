"""The Cosmos DB unit of work, generic over aggregates: one partition-scoped transactional batch
per changed aggregate, carrying the aggregate (create, or replace conditioned on its etag), one
create per event, and the create of the claimed idempotency record, if any."""

from __future__ import annotations

from typing import Any

from azure.cosmos import ContainerProxy

from cosmos_outbox._documents import WriteOperation, aggregate_from_document
from cosmos_outbox._domain import Aggregate
from cosmos_outbox._unit_of_work import TrackingRepository, TrackingUnitOfWork
from cosmos_outbox.cosmos._errors import cosmos_errors
from cosmos_outbox.errors import NotFoundError, PreconditionFailedError, StoreUnavailableError
from cosmos_outbox.settings import DEFAULT_IDEMPOTENCY_TTL_SECONDS

_PROBE = "health-probe"


class CosmosRepository[A: Aggregate](TrackingRepository[A]):
    def __init__(self, container: ContainerProxy, kind: type[A]) -> None:
        super().__init__(kind)
        self._container = container

    def read(self, aggregate_id: str) -> tuple[A, str]:
        with cosmos_errors(self.kind.aggregate_type, aggregate_id):
            document = self._container.read_item(item=aggregate_id, partition_key=aggregate_id)
        return aggregate_from_document(self.kind, document), document["_etag"]


class CosmosUnitOfWork(TrackingUnitOfWork):
    """Not thread-safe; one per command."""

    def __init__(self, container: ContainerProxy, *, event_ttl_seconds: int,
                 idempotency_ttl_seconds: int = DEFAULT_IDEMPOTENCY_TTL_SECONDS) -> None:
        super().__init__(event_ttl_seconds=event_ttl_seconds,
                         idempotency_ttl_seconds=idempotency_ttl_seconds)
        self._container = container

    def _repository[A: Aggregate](self, kind: type[A]) -> TrackingRepository[A]:
        return CosmosRepository(self._container, kind)

    def _execute(self, aggregate_type: str, partition_key: str,
                 operations: list[WriteOperation]) -> str:
        with cosmos_errors(aggregate_type, partition_key):
            results = self._container.execute_item_batch(
                batch_operations=[_sdk_operation(*op) for op in operations],
                partition_key=partition_key,
            )
        return _etag_of(results[0])

    def _read(self, partition_key: str, document_id: str) -> dict[str, Any] | None:
        try:
            with cosmos_errors():
                return dict(self._container.read_item(item=document_id,
                                                      partition_key=partition_key))
        except NotFoundError:
            return None

    def ping(self) -> None:
        """A 1-RU point read of a document that does not exist: "not found" means the store
        answered. A missing container answers "not found" too (the SDK reads the container's
        properties first; once it has them the service says 404/1003, which is translated to
        StoreUnavailableError), so a "not found" is checked with a read of the container's
        properties: if the container is missing, the store is unavailable, not healthy."""
        try:
            with cosmos_errors():
                self._container.read_item(item=_PROBE, partition_key=_PROBE)
        except NotFoundError:
            try:
                with cosmos_errors():
                    self._container.read()
            except NotFoundError:
                raise StoreUnavailableError(
                    "the database or container does not exist", retry_after=30.0
                ) from None


def _sdk_operation(kind: str, document: dict[str, Any], etag: str | None) -> tuple[Any, ...]:
    if kind == "replace":
        return ("replace", (document["id"], document), {"if_match_etag": etag})
    return (kind, (document,))


def _etag_of(result: Any) -> str:
    etag = result.get("eTag") or (result.get("resourceBody") or {}).get("_etag")
    if not etag:
        raise PreconditionFailedError("the store returned no etag for the written aggregate")
    return str(etag)
