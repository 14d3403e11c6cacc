"""Cosmos failures translated once into application errors."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import NoReturn

from azure.core.exceptions import ServiceRequestError, ServiceResponseError
from azure.cosmos.exceptions import (
    CosmosBatchOperationError,
    CosmosClientTimeoutError,
    CosmosHttpResponseError,
)

from cosmos_outbox.errors import (
    AlreadyExistsError,
    InvalidContinuationError,
    InvalidQueryError,
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


def translate(
    status: int,
    message: str,
    headers: Mapping[str, str] | None = None,
    *,
    sub_status: int | None = None,
    aggregate_type: str = "document",
    aggregate_id: str = "",
) -> OutboxError:
    if status == 404 and sub_status == OWNER_RESOURCE_NOT_FOUND:
        return StoreUnavailableError("the database or container does not exist", retry_after=30.0)
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


class cosmos_errors:  # noqa: N801 - a context manager used as a function: `with cosmos_errors():`
    """Translate every Cosmos failure raised inside into an application error; a 404 names the
    aggregate looked for. (A class rather than a generator: it wraps every store call, and a
    generator's context manager costs several times as much.)"""

    __slots__ = ("aggregate_id", "aggregate_type")

    def __init__(self, aggregate_type: str = "document", aggregate_id: str = "") -> None:
        self.aggregate_type = aggregate_type
        self.aggregate_id = aggregate_id

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            error = self._error_of(exc)
            if error is not None:
                raise error from None

    def _error_of(self, exc: BaseException) -> OutboxError | None:
        """The application error `exc` is (None: it is not a Cosmos failure)."""
        return _translated(exc, self.aggregate_type, self.aggregate_id)


def raise_translated(exc: BaseException, aggregate_type: str, aggregate_id: str) -> NoReturn:
    """Raise `exc` translated as `cosmos_errors` translates it (or as it is, when it is not a
    Cosmos failure): for the batch's call, where `try` costs nothing and `cosmos_errors`'
    object is one more to make on every commit."""
    error = _translated(exc, aggregate_type, aggregate_id)
    if error is None:
        raise exc
    raise error from None


class query_errors(cosmos_errors):  # noqa: N801 - used as a function, as cosmos_errors
    """`cosmos_errors` for an app's query: a 400 is the query refused (InvalidQueryError, with
    the service's message) unless the request carried a continuation token (then the token is
    what was refused: InvalidContinuationError)."""

    __slots__ = ("continued",)

    def __init__(self, *, continued: bool = False) -> None:
        super().__init__()
        self.continued = continued

    def _error_of(self, exc: BaseException) -> OutboxError | None:
        if (
            isinstance(exc, CosmosHttpResponseError)
            and exc.status_code == 400
            and not self.continued
        ):
            message = str(exc.message or exc.reason or "bad request").splitlines()[0]
            return InvalidQueryError(f"Cosmos DB refused the query: {message}")
        return super()._error_of(exc)


def _translated(exc: BaseException, aggregate_type: str, aggregate_id: str) -> OutboxError | None:
    """The application error of a Cosmos failure; None for anything else (raised as it is)."""
    if isinstance(exc, CosmosBatchOperationError):
        failed = exc.operation_responses[exc.error_index] if exc.operation_responses else {}
        status = int(failed.get("statusCode", exc.status_code or 500))
        error = translate(
            status,
            "batch operation failed",
            exc.headers,
            aggregate_type=aggregate_type,
            aggregate_id=aggregate_id,
        )
        error.operation_index = exc.error_index
        return error
    if isinstance(exc, CosmosClientTimeoutError):
        return StoreUnavailableError("the store timed out")
    if isinstance(exc, CosmosHttpResponseError):
        return translate(
            int(exc.status_code or 503),
            exc.reason or "cosmos error",
            exc.headers,
            sub_status=exc.sub_status,
            aggregate_type=aggregate_type,
            aggregate_id=aggregate_id,
        )
    if isinstance(exc, (ServiceRequestError, ServiceResponseError)):
        return StoreUnavailableError("the store is unreachable")
    return None
