"""RFC 9457 problem responses, and the one place application errors become HTTP statuses."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from typing import Any

import azure.functions as func
from pydantic import BaseModel, ConfigDict, ValidationError

from cosmos_outbox._domain import DomainError
from cosmos_outbox.errors import (
    AlreadyExistsError,
    DependencyUnavailableError,
    IdempotencyKeyReusedError,
    InvalidContinuationError,
    NotFoundError,
    PreconditionFailedError,
    PublishFailedError,
    SessionIdTooLongError,
    TransientStoreError,
    UnrecordedChangeError,
)
from cosmos_outbox.settings import SettingsError

logger = logging.getLogger("cosmos_outbox.http")
PROBLEM_JSON = "application/problem+json"


class FieldError(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)
    field: str
    message: str


class Problem(BaseModel):
    """An RFC 9457 problem document. `errors` names the field at fault (a JSON path into the
    body, or the parameter or header name) for validation problems."""

    model_config = ConfigDict(frozen=True, defer_build=True)
    type: str = "about:blank"
    title: str
    status: int
    detail: str
    errors: list[FieldError] | None = None


class HttpProblemError(Exception):
    """Raised by the HTTP layer to answer with a problem response."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str | None = None,
        *,
        errors: Sequence[FieldError] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail or title)
        self.problem = Problem(
            title=title,
            status=status,
            detail=detail or title,
            errors=list(errors) if errors else None,
        )
        self.headers = headers or {}

    def response(self) -> func.HttpResponse:
        # json.dumps escapes every non-ASCII character, lone surrogates included, so whatever a
        # client sent and an error message repeats, the document serialises.
        return func.HttpResponse(
            json.dumps(self.problem.model_dump(exclude_none=True), separators=(",", ":")),
            status_code=self.problem.status,
            headers=self.headers,
            mimetype=PROBLEM_JSON,
        )


def _printable(text: str, limit: int = 200) -> str:
    """What a client sent, safe to repeat: control, format and surrogate characters escaped,
    cut at `limit` characters."""
    out = "".join(
        ch
        if ch.isprintable() and not 0xD800 <= ord(ch) <= 0xDFFF
        else ch.encode("unicode_escape", "backslashreplace").decode("ascii")
        for ch in text[:limit]
    )
    return out + ("..." if len(text) > limit else "")


def field_errors(exc: ValidationError, *, prefix: str = "") -> list[FieldError]:
    errors = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        loc = [_printable(str(p)) for p in error["loc"]]
        field = ".".join(([prefix] if prefix else []) + loc) or "$"
        message = _printable(error["msg"].removeprefix("Value error, "), 500)
        errors.append(FieldError(field=field, message=message))
    return errors


def bad_request(detail: str, field: str) -> HttpProblemError:
    return HttpProblemError(
        400, "Bad Request", detail, errors=[FieldError(field=field, message=detail)]
    )


def from_exception(exc: Exception) -> HttpProblemError:
    """Map an error raised by a use case to its problem; unknown errors become a bare 500."""
    match exc:
        case HttpProblemError():
            return exc
        case ValidationError():
            return HttpProblemError(
                400, "Bad Request", "the request is not valid", errors=field_errors(exc)
            )
        case NotFoundError():
            return HttpProblemError(404, "Not Found", f"no such {exc.aggregate_type}")
        case PublishFailedError():
            logger.error("publishing failed: %s", exc, exc_info=exc.__cause__)
            return HttpProblemError(
                503,
                "Service Unavailable",
                f"Service Bus (the message broker) did not take the messages ({exc}); retry "
                "later (what was sent already is dropped as a duplicate)",
                headers={"Retry-After": "5"},
            )
        case DependencyUnavailableError():
            logger.warning("dependency unavailable: %s", exc)
            return HttpProblemError(
                503,
                "Service Unavailable",
                f"{exc}; retry later",
                headers={"Retry-After": "5"},
            )
        case PreconditionFailedError():
            return HttpProblemError(
                412,
                "Precondition Failed",
                f"the {exc.aggregate_type} has changed; read it again and retry with its ETag",
            )
        case IdempotencyKeyReusedError():
            return HttpProblemError(
                422,
                "Unprocessable Content",
                "this Idempotency-Key was used for another request to this route (another body "
                "or target); a retry must repeat the request unchanged, a new request needs a "
                "new key",
                errors=[FieldError(field="Idempotency-Key", message="used for another request")],
            )
        case SessionIdTooLongError():
            return HttpProblemError(400, "Bad Request", str(exc))
        case AlreadyExistsError():
            return HttpProblemError(409, "Conflict", "the resource already exists")
        case DomainError():
            return HttpProblemError(409, "Conflict", str(exc))
        case InvalidContinuationError():
            return bad_request(
                "the continuation token is not valid: pass back a "
                "continuationToken this API returned, unchanged",
                "continuationToken",
            )
        case TransientStoreError():
            return _store_busy(exc)
        case UnrecordedChangeError():
            return _unrecorded(exc)
        case SettingsError():
            logger.error("configuration error: %s", exc)
            return HttpProblemError(
                503,
                "Service Unavailable",
                "the service is not configured",
                headers={"Retry-After": "30"},
            )
    logger.error("unhandled error", exc_info=exc)
    return HttpProblemError(500, "Internal Server Error", "an unexpected error occurred")


def _store_busy(exc: TransientStoreError) -> HttpProblemError:
    seconds = str(max(1, math.ceil(exc.retry_after)))
    busy = exc.status == 429
    return HttpProblemError(
        exc.status,
        "Too Many Requests" if busy else "Service Unavailable",
        f"Cosmos DB (the store) is {'busy' if busy else 'unavailable'}; retry later",
        headers={"Retry-After": seconds},
    )


def _unrecorded(exc: UnrecordedChangeError) -> HttpProblemError:
    logger.error(
        "change refused: %s",
        exc,
        extra={
            "aggregate.type": exc.aggregate_type,
            "aggregate.id": exc.aggregate_id,
            "aggregate.changed_fields": exc.fields,
        },
    )
    return HttpProblemError(500, "Internal Server Error", "an unexpected error occurred")


def json_response(
    body: Any, *, status: int = 200, headers: dict[str, str] | None = None
) -> func.HttpResponse:
    payload = (
        body.model_dump_json(by_alias=True)
        if isinstance(body, BaseModel)
        else json.dumps(body, separators=(",", ":"))
    )
    return func.HttpResponse(
        payload, status_code=status, headers=headers, mimetype="application/json"
    )
