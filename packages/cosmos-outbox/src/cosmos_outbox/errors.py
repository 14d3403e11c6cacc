"""Application errors. Adapters translate storage/broker failures into these once; the HTTP
entrypoint maps each to one problem response."""

from __future__ import annotations


class ApplicationError(Exception):
    """Base of every error a use case reports to its caller."""


class NotFoundError(ApplicationError):
    """No aggregate of this type with this id (404)."""

    def __init__(self, aggregate_type: str, aggregate_id: str) -> None:
        super().__init__(f"{aggregate_type} {aggregate_id} not found")
        self.aggregate_type = aggregate_type
        self.aggregate_id = aggregate_id


class AlreadyExistsError(ApplicationError):
    """A document with the same id already exists (409)."""


class IdempotencyKeyReusedError(ApplicationError):
    """The Idempotency-Key was already used for another request (another body or target) on
    the same route (422). Nothing was written."""


class PreconditionFailedError(ApplicationError):
    """The aggregate changed since the caller (or this request) read it: stale etag (412)."""

    def __init__(self, message: str, *, aggregate_type: str = "resource") -> None:
        super().__init__(message)
        self.aggregate_type = aggregate_type


class TransientStoreError(ApplicationError):
    """The store cannot serve the request now; the caller may retry after `retry_after` s."""

    status: int = 503

    def __init__(self, message: str, *, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ThrottledError(TransientStoreError):
    """The store throttled the request (Cosmos 429)."""

    status = 429


class StoreUnavailableError(TransientStoreError):
    """The store is unavailable or timed out (503)."""

    status = 503


class InvalidContinuationError(ApplicationError):
    """A paging continuation token that the store does not accept (400)."""


class PublishFailedError(ApplicationError):
    """The broker did not take the messages (503); nothing is lost, the action may be
    repeated (the topic drops what it already has, by MessageId)."""
