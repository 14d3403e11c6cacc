"""The types the operators' routes parse (a reason, an instant, an aggregate type), shared by
the routes of `operator_routes` and `recovery_routes` (`cosmos_outbox.operators` publishes them),
and the console's `whole` query parameter."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated

from pydantic import BeforeValidator, Field, TypeAdapter, WithJsonSchema

from cosmos_outbox.http import QueryParameter
from cosmos_outbox.text import Text

__all__ = ["WHOLE", "AggregateType", "Instant", "OperatorReason", "parse_instant"]

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
AggregateType = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9]{0,63}$", max_length=64)]

#: A route whose answer the console shows with a body (a quarantined event's, a dead letter's):
#: the page shortens a long body unless asked for the whole (the JSON always holds all of it).
WHOLE = QueryParameter(
    "whole",
    TypeAdapter(bool),
    "The console page only: show the whole body (the page shortens a long one; JSON always "
    "holds all of it)",
)
