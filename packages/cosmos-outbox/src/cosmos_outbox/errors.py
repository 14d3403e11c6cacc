"""Application errors. Adapters translate storage/broker failures into these once; the HTTP
entrypoint maps each to one problem response."""

from __future__ import annotations

__all__ = [
    "AlreadyExistsError",
    "BatchTooLargeError",
    "DependencyUnavailableError",
    "IdempotencyKeyReusedError",
    "InvalidContinuationError",
    "InvalidQueryError",
    "NotFoundError",
    "OutboxError",
    "PayloadNotFoundError",
    "PayloadReferenceError",
    "PayloadStoreError",
    "PreconditionFailedError",
    "PublishFailedError",
    "SessionIdTooLongError",
    "StoreUnavailableError",
    "ThrottledError",
    "TooLateToCancelError",
    "TransientStoreError",
    "UnrecordedChangeError",
]


class OutboxError(Exception):
    """Base of every error a use case reports to its caller."""

    #: when a transactional batch failed: the index of its operation that failed (the rest
    #: failed with it: 424)
    operation_index: int | None = None


class NotFoundError(OutboxError):
    """No aggregate of this type with this id (404)."""

    def __init__(self, aggregate_type: str, aggregate_id: str) -> None:
        super().__init__(f"{aggregate_type} {aggregate_id} not found")
        self.aggregate_type = aggregate_type
        self.aggregate_id = aggregate_id


class UnrecordedChangeError(OutboxError):
    """A change altered an aggregate's state without recording an event (or a new aggregate
    recorded none): refused, nothing written. It is a defect of the aggregate's code, never of
    the request: subscribers would never hear of the change (500, logged with the aggregate
    type and the fields)."""

    def __init__(self, aggregate_type: str, aggregate_id: str, fields: list[str]) -> None:
        what = f"changed {', '.join(fields)}" if fields else "was created"
        super().__init__(
            f"{aggregate_type} {aggregate_id} {what} without recording an event: "
            "refused, nothing written (every change records its event)"
        )
        self.aggregate_type = aggregate_type
        self.aggregate_id = aggregate_id
        #: the fields that changed (empty for a new aggregate that recorded no event)
        self.fields = fields


class BatchTooLargeError(OutboxError):
    """A transactional batch (a transaction's, an aggregate's change) would exceed Cosmos DB's
    limits (100 operations, 2 MB): refused before the round trip, nothing written."""


class SessionIdTooLongError(OutboxError, ValueError):
    """A transaction's SessionId (its partition key, unless it names a `session_id` of its own)
    is longer than a Service Bus SessionId may be (`limit`: 128 characters, counted in UTF-16
    units as .NET counts them): refused when the transaction is opened, nothing written (its
    events could never be sent). A ValueError too, as it was before 0.4."""

    def __init__(self, message: str, *, length: int, limit: int) -> None:
        super().__init__(message)
        self.length = length
        self.limit = limit


class AlreadyExistsError(OutboxError):
    """A document with the same id already exists (409)."""


class IdempotencyKeyReusedError(OutboxError):
    """The Idempotency-Key was already used for another request (another body or target) on
    the same route (422). Nothing was written."""


class PreconditionFailedError(OutboxError):
    """The aggregate changed since the caller (or this request) read it: stale etag (412)."""

    def __init__(self, message: str, *, aggregate_type: str = "resource") -> None:
        super().__init__(message)
        self.aggregate_type = aggregate_type


class TooLateToCancelError(OutboxError):
    """A scheduled event's due time came and it was released before the cancel (409): it is
    being delivered, and no cancel can stop it now. Nothing of the transaction was written; the
    app decides what the change means now (a payment after the reservation expired)."""

    def __init__(self, event_id: str, released_at: str | None) -> None:
        super().__init__(
            f"scheduled event {event_id} was released at {released_at} (its due time came): "
            "it is being delivered, too late to cancel"
        )
        self.event_id = event_id
        self.released_at = released_at


class TransientStoreError(OutboxError):
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


class InvalidContinuationError(OutboxError):
    """A paging continuation token that the store does not accept (400)."""


class InvalidQueryError(OutboxError):
    """A query the store refuses (400): not Cosmos DB SQL, a parameter it names not given, or,
    on the test kit's in-memory store, a part of the language it does not serve (named)."""


class PublishFailedError(OutboxError):
    """The broker did not take the messages (503); nothing is lost, the action may be
    repeated (the topic drops what it already has, by MessageId)."""


class DependencyUnavailableError(OutboxError):
    """An operators' action or read could not be served because one dependency did not answer
    (503): `dependency` names it ("Cosmos DB", "Service Bus", ...) and `detail` says what it
    did (timed out, refused the connection...)."""

    def __init__(self, dependency: str, detail: str) -> None:
        super().__init__(f"{dependency} {detail}")
        self.dependency = dependency
        self.detail = detail


class RelayNotReadyError(OutboxError):
    """The relay cannot start: something it needs is missing (its topic, the claim check's
    payload container, its lease container); the message says what and how to fix it. Its
    invocation fails and is retried (nothing is lost) until it is fixed."""


class PayloadStoreError(OutboxError):
    """The payload store (the claim check's blob container) failed or could not be reached.
    Transient: the relay's invocation fails and is retried; a subscriber's message is abandoned
    and redelivered."""


class PayloadNotFoundError(PayloadStoreError):
    """No payload under this reference: expired (the lifecycle rule), deleted, or never
    written. Retrying does not help once the message's deliveries run out: dead-lettered."""

    def __init__(self, reference: str) -> None:
        super().__init__(f"no payload at {reference}")
        self.reference = reference


class PayloadReferenceError(PayloadStoreError):
    """A reference that is not one of this store's (another account or container, not a URL):
    refused without a request, so a message can never make a subscriber fetch, with its
    credentials, from where it says."""

    def __init__(self, reference: str, reason: str) -> None:
        super().__init__(f"not a payload of this store ({reason}): {reference}")
        self.reference = reference
