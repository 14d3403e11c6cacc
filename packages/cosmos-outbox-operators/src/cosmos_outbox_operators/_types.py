"""The types the operators' routes parse (a reason, an instant, an aggregate type, a filter's
text), their path parameters (`PARAMETERS`, declared once for both doors), and the console's
`whole` query parameter: shared by the route modules of `cosmos_outbox_operators._routes`."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated

from pydantic import BeforeValidator, Field, TypeAdapter, WithJsonSchema

from cosmos_outbox.http import PathParameter, QueryParameter
from cosmos_outbox.text import Text

__all__ = [
    "ERRORS",
    "PARAMETERS",
    "WHOLE",
    "AggregateType",
    "FilterText",
    "Instant",
    "OperatorReason",
    "parse_instant",
]

#: Text a filter looks for (a dead letter's reason or description).
FilterText = Annotated[str, Text(max_length=200)]
#: Free text an operator gives for an action (discarding a quarantined event): required, the
#: same character rules as every text field.
OperatorReason = Annotated[str, Text(max_length=500)]

_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def parse_instant(value: object) -> datetime:
    """An RFC 3339 date-time with its offset (no other form: no bare dates, no epoch numbers),
    as an aware UTC datetime; times beyond the calendar's range clamp to its ends."""
    m = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if m is None:
        raise ValueError("must be an RFC 3339 date-time with an offset, e.g. 2026-11-22T08:00:00Z")
    fraction = (m.group(7) or ".0")[1:7].ljust(6, "0")
    text = (
        f"{m.group(1)}-{m.group(2)}-{m.group(3)}T{m.group(4)}:{m.group(5)}:{m.group(6)}"
        f".{fraction}{'+00:00' if m.group(8) in 'Zz' else m.group(8)}"
    )
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError("is not a valid date-time") from None
    try:
        return at.astimezone(UTC)
    except OverflowError:
        return (datetime.min if at.year == 1 else datetime.max).replace(tzinfo=UTC)


Instant = Annotated[
    datetime,
    BeforeValidator(parse_instant),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
#: An aggregate type's name (the console's fields check it too).
AGGREGATE_TYPE_PATTERN = "[A-Za-z][A-Za-z0-9]{0,63}"
AggregateType = Annotated[str, Field(pattern=f"^{AGGREGATE_TYPE_PATTERN}$", max_length=64)]

#: A route whose answer the console shows with a body (a quarantined event's, a dead letter's):
#: the page shortens a long body unless asked for the whole (the JSON always holds all of it).
WHOLE = QueryParameter(
    "whole",
    TypeAdapter(bool),
    "The console page only: show the whole body (the page shortens a long one; JSON always "
    "holds all of it)",
)

#: The path parameters of the operators' routes, by name (each door declares them once).
PARAMETERS = {
    p.name: p
    for p in (
        PathParameter("eventId", "the event id"),
        PathParameter("entity", "the subscription or queue"),
        PathParameter(
            "sequenceNumber",
            "the dead letter's sequence number",
            pattern=r"^[0-9]{1,19}$",
            max_length=19,
        ),
        PathParameter("subscription", "the subscription"),
        PathParameter(
            "aggregateType",
            "the aggregate type",
            pattern=f"^{AGGREGATE_TYPE_PATTERN}$",
            max_length=64,
        ),
        PathParameter("aggregateId", "the aggregate id"),
        PathParameter(
            "groupId", "the failure group's id", pattern=r"^[0-9a-f]{12}$", max_length=12
        ),
        PathParameter(
            "failureId",
            "the failed message's id (failure-<32 hex>)",
            pattern=r"^failure-[0-9a-f]{32}$",
            max_length=40,
        ),
        PathParameter(
            "operationId",
            "the operation's id",
            pattern=r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
            max_length=36,
        ),
    )
}
#: The problems an operation over one named thing may answer with.
ERRORS = (400, 404, 429, 500, 503)
#: Those of an operation that reads a body (an action, a preview).
BODY_ERRORS = (400, 404, 413, 415, 429, 500, 503)
#: Those of a start of a bulk operation: 409 while an open one holds its items.
START_ERRORS = (400, 404, 409, 413, 415, 429, 500, 503)
