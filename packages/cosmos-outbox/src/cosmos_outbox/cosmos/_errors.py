"""Cosmos failures translated once into application errors."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from azure.core.exceptions import ServiceRequestError, ServiceResponseError
from azure.cosmos.exceptions import (
    CosmosBatchOperationError,
    CosmosClientTimeoutError,
    CosmosHttpResponseError,
)

from cosmos_outbox.errors import (
    AlreadyExistsError,
    InvalidContinuationError,
    NotFoundError,
    OutboxError,
    PreconditionFailedError,
    StoreUnavailableError,
    ThrottledError,
)

# 404 with this substatus: the database or container itself does not exist ("owner resource
# does not exist"), a misconfiguration, not a missing document.
OWNER_RESOURCE_NOT_FOUND = 1003


def _retry_after(headers: Mapping[str, str] | None) -> float:
    if headers:
        value = headers.get("x-ms-retry-after-ms") or headers.get("Retry-After-Ms")
        if value:
            try:
                return max(float(value) / 1000.0, 0.001)
            except ValueError:
                pass
    return 1.0


def translate(status: int, message: str, headers: Mapping[str, str] | None = None,
              *, sub_status: int | None = None, aggregate_type: str = "document",
              aggregate_id: str = "") -> OutboxError:
    if status == 404 and sub_status == OWNER_RESOURCE_NOT_FOUND:
        return StoreUnavailableError("the database or container does not exist",
                                     retry_after=30.0)
    if status == 404:
        return NotFoundError(aggregate_type, aggregate_id)
    if status == 409:
        return AlreadyExistsError(message)
    if status == 412:
        return PreconditionFailedError(message, aggregate_type=aggregate_type)
    if status == 429:
        return ThrottledError("the store is throttling requests", retry_after=_retry_after(headers))
    if status == 400:
        return InvalidContinuationError(message)
    return StoreUnavailableError(f"the store answered {status}", retry_after=_retry_after(headers))


@contextmanager
def cosmos_errors(aggregate_type: str = "document", aggregate_id: str = "") -> Iterator[None]:
    """Translate every Cosmos failure raised inside into an application error; a 404 names the
    aggregate looked for."""
    try:
        yield
    except CosmosBatchOperationError as exc:
        failed = exc.operation_responses[exc.error_index] if exc.operation_responses else {}
        status = int(failed.get("statusCode", exc.status_code or 500))
        error = translate(status, "batch operation failed", exc.headers,
                          aggregate_type=aggregate_type, aggregate_id=aggregate_id)
        error.operation_index = exc.error_index
        raise error from None
    except CosmosClientTimeoutError:
        raise StoreUnavailableError("the store timed out") from None
    except CosmosHttpResponseError as exc:
        raise translate(int(exc.status_code or 503), exc.reason or "cosmos error", exc.headers,
                        sub_status=exc.sub_status, aggregate_type=aggregate_type,
                        aggregate_id=aggregate_id) from None
    except (ServiceRequestError, ServiceResponseError):
        raise StoreUnavailableError("the store is unreachable") from None
