"""The generic core of the domain: self-identifying events, and the aggregate that records them.

Nothing here knows a particular aggregate. An aggregate names itself (`aggregate_type`); its
events carry the aggregate's type, id and version after the change. On the wire the id is
`<aggregateType>Id` (a contact's events carry `contactId`), so each aggregate's event base sets
its alias generator with `event_aliases`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr
from pydantic.alias_generators import to_camel


def new_id() -> str:
    return str(uuid.uuid4())


def utcnow() -> datetime:
    return datetime.now(UTC)


def event_aliases(aggregate_type: str) -> Callable[[str], str]:
    """camelCase, with `aggregate_id` spelled `<aggregateType>Id` (`contactId`)."""

    def alias(field: str) -> str:
        return f"{aggregate_type}Id" if field == "aggregate_id" else to_camel(field)

    return alias


class DomainEvent(BaseModel):
    """Something that happened to one aggregate. `version` is the aggregate's version after it."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )

    aggregate_type: ClassVar[str]

    id: str = Field(default_factory=new_id)
    aggregate_id: str
    version: int = Field(ge=1)
    created_at: datetime = Field(default_factory=utcnow)
    traceparent: str | None = None


class Aggregate(BaseModel):
    """A consistency boundary: an id, a version, and the events its changes raised, which the
    unit of work drains into one atomic write. Its fields are its whole stored state, so the
    stored document and the views are derived from them, never listed again."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, validate_assignment=True
    )

    aggregate_type: ClassVar[str]

    id: str = Field(default_factory=new_id, min_length=1, max_length=128)
    version: int = Field(default=1, ge=1)
    _events: list[DomainEvent] = PrivateAttr(default_factory=list)

    @property
    def events(self) -> list[DomainEvent]:
        """The events recorded and not yet collected, in the order they happened."""
        return list(self._events)

    def collect_events(self) -> list[DomainEvent]:
        """Hand over the recorded events (in the order they happened) and forget them."""
        drained, self._events = self._events, []
        return drained

    def _record(self, kind: type[DomainEvent], *, at: datetime | None = None,
                **changes: Any) -> None:
        """Record that `kind` happened (now, or at `at`) at the current version."""
        self._events.append(
            kind.model_validate({
                "aggregate_id": self.id, "version": self.version, "created_at": at or utcnow(),
                **changes,
            })
        )

    def _change(self, kind: type[DomainEvent], *, at: datetime | None = None,
                **changes: Any) -> None:
        """Grow the version by one and record the event that says why."""
        now = at or utcnow()
        self.version += 1
        self._touched(now)
        self._record(kind, at=now, **changes)

    def _touched(self, at: datetime) -> None:
        """Hook: a change happened at `at` (a contact keeps it as `modified_at`)."""

