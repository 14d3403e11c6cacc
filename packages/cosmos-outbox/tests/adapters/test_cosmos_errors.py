"""Cosmos failures become application errors once, in infra (real SDK exception types)."""

from __future__ import annotations

import pytest
from azure.core.exceptions import ServiceRequestError
from azure.cosmos.exceptions import (
    CosmosBatchOperationError,
    CosmosClientTimeoutError,
    CosmosHttpResponseError,
)

from cosmos_outbox.cosmos._errors import cosmos_errors
from cosmos_outbox.errors import (
    AlreadyExistsError,
    InvalidContinuationError,
    NotFoundError,
    OutboxError,
    PreconditionFailedError,
    StoreUnavailableError,
    ThrottledError,
)


def http_error(status: int, message: str, sub_status: int | None = None) -> CosmosHttpResponseError:
    headers = {} if sub_status is None else {"x-ms-substatus": str(sub_status)}
    error = CosmosHttpResponseError(  # type: ignore[no-untyped-call]
        status_code=status, message=message
    )
    error.headers, error.sub_status = headers, sub_status
    return error


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (404, NotFoundError),
        (409, AlreadyExistsError),
        (412, PreconditionFailedError),
        (429, ThrottledError),
        (400, InvalidContinuationError),
        (503, StoreUnavailableError),
        (408, StoreUnavailableError),
        (500, StoreUnavailableError),
    ],
)
def test_http_statuses_map_to_application_errors(status: int, expected: type[Exception]) -> None:
    with pytest.raises(expected), cosmos_errors("c1"):
        raise http_error(status, "boom")


def test_throttling_carries_the_store_retry_after() -> None:
    error = http_error(429, "slow down")
    error.headers = {"x-ms-retry-after-ms": "2500"}
    with pytest.raises(ThrottledError) as info, cosmos_errors():
        raise error
    assert info.value.retry_after == 2.5


def test_a_failed_batch_reports_the_failing_operation_status() -> None:
    responses = [{"statusCode": 424}, {"statusCode": 412}, {"statusCode": 424}]
    with pytest.raises(PreconditionFailedError), cosmos_errors("c1"):
        raise CosmosBatchOperationError(  # type: ignore[no-untyped-call]
            error_index=1,
            headers={},
            status_code=412,
            message="batch failed",
            operation_responses=responses,
        )


@pytest.mark.parametrize(
    "error",
    [CosmosClientTimeoutError(), ServiceRequestError("refused")],  # type: ignore[no-untyped-call]
)
def test_timeouts_and_unreachable_stores_are_unavailable(error: Exception) -> None:
    with pytest.raises(StoreUnavailableError), cosmos_errors():
        raise error


def test_translated_errors_do_not_chain_sdk_internals() -> None:
    with pytest.raises(OutboxError) as info, cosmos_errors():
        raise http_error(503, "AccountKey=secret")
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_a_missing_document_names_the_aggregate_looked_for() -> None:
    with pytest.raises(NotFoundError) as info, cosmos_errors("order", "o1"):
        raise http_error(404, "Entity does not exist", sub_status=0)
    assert (info.value.aggregate_type, info.value.aggregate_id) == ("order", "o1")


def test_a_missing_container_is_unavailable_not_a_missing_document() -> None:
    with pytest.raises(StoreUnavailableError), cosmos_errors("order", "o1"):
        raise http_error(404, "Owner resource does not exist", sub_status=1003)
