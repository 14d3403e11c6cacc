"""The domain core: self-identifying events, the catalogue they register in, the aggregate that
records them, and the base of business-rule errors.

Nothing here knows a particular aggregate. An aggregate names itself (`aggregate_type`) and the
collection it is kept and published under (`collection`: the API's path segment and the
CloudEvents source `/<collection>`). Its events carry the aggregate's type, id and version after
the change. On the wire the id is `<aggregateType>Id` (an order's events carry `orderId`), so
each aggregate's event base sets its alias generator with `event_aliases`.

Every concrete event class (one with a fixed `action`) registers itself in `EVENTS` when it is
defined, under its aggregate type and action: the catalogue is derived from the classes, never
kept by hand, and the stored document, the message and the OpenAPI document are derived from it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr
from pydantic.alias_generators import to_camel

__all__ = [
    "AGGREGATES",
    "EVENTS",
    "Aggregate",
    "DomainError",
    "DomainEvent",
    "EventCatalogue",
    "UnknownEventError",
    "assigned_id",
    "event_aliases",
    "new_id",
    "utcnow",
]


class DomainError(Exception):
    """Base of every business-rule violation an aggregate raises (answered 409 by the HTTP
    layer, with the error's message as the detail)."""


def new_id() -> str:
    return str(uuid.uuid4())


#: The id the next aggregate made in this context takes (`assigned_id`), else a new uuid4.
_ASSIGNED_ID: ContextVar[str | None] = ContextVar("cosmos_outbox_assigned_id", default=None)


@contextmanager
def assigned_id(aggregate_id: str) -> Iterator[None]:
    """Aggregates made inside the block (by their own factory methods, unchanged) take
    `aggregate_id` instead of a new uuid4, and so do the events they record: how a create with
    an Idempotency-Key gets the id derived from the key."""
    token = _ASSIGNED_ID.set(aggregate_id)
    try:
        yield
    finally:
        _ASSIGNED_ID.reset(token)


def _aggregate_id() -> str:
    return _ASSIGNED_ID.get() or new_id()


def utcnow() -> datetime:
    return datetime.now(UTC)


def event_aliases(aggregate_type: str) -> Callable[[str], str]:
    """camelCase, with `aggregate_id` spelled `<aggregateType>Id` (`orderId`)."""

    def alias(field: str) -> str:
        return f"{aggregate_type}Id" if field == "aggregate_id" else to_camel(field)

    return alias


class UnknownEventError(LookupError):
    """No event class is registered for an aggregate type and action."""

    def __init__(self, aggregate_type: str, action: object) -> None:
        super().__init__(f"no {aggregate_type} event has the action {action!r}")
        self.aggregate_type = aggregate_type
        self.action = action


class EventCatalogue:
    """Every concrete event class, by aggregate type and action, filled as the classes are
    defined (`DomainEvent.__pydantic_init_subclass__`)."""

    def __init__(self) -> None:
        self._by_type: dict[str, dict[str, type[DomainEvent]]] = {}

    def register(self, kind: type[DomainEvent]) -> None:
        aggregate_type = getattr(kind, "aggregate_type", None)
        if not isinstance(aggregate_type, str) or not aggregate_type:
            raise TypeError(f"event class {kind.__qualname__} is bound to no aggregate type: "
                            "derive it from its aggregate's event base")
        action = kind.action_name()
        known = self._by_type.setdefault(aggregate_type, {})
        same = known.get(action)
        if same is not None and (same.__module__, same.__qualname__) != (
                kind.__module__, kind.__qualname__):
            raise TypeError(f"{kind.__qualname__} and {same.__qualname__} both have the "
                            f"{aggregate_type} action {action!r}")
        known[action] = kind

    def resolve(self, aggregate_type: str, action: object) -> type[DomainEvent]:
        """The class of an event. Raises UnknownEventError."""
        found = self._by_type.get(aggregate_type, {}).get(action) if isinstance(
            action, str) else None
        if found is None:
            raise UnknownEventError(aggregate_type, action)
        return found

    def parse(self, aggregate_type: str, data: Mapping[str, Any]) -> DomainEvent:
        """An event from its data as stored and sent (camelCase, with its `action`)."""
        return self.resolve(aggregate_type, data.get("action")).model_validate(data)

    def actions(self, aggregate_type: str) -> frozenset[str]:
        return frozenset(self._by_type.get(aggregate_type, {}))

    def __iter__(self) -> Iterator[type[DomainEvent]]:
        for events in self._by_type.values():
            yield from events.values()


#: The events of every aggregate whose module is imported.
EVENTS = EventCatalogue()


class DomainEvent(BaseModel):
    """Something that happened to one aggregate. `version` is the aggregate's version after it.
    A concrete event fixes its `action` (`action: Literal["XEvent"] = "XEvent"`) and registers
    itself in `EVENTS`; an aggregate's event base names the aggregate (`aggregate_type`)."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )

    aggregate_type: ClassVar[str]

    id: str = Field(default_factory=new_id)
    aggregate_id: str
    version: int = Field(ge=1)
    created_at: datetime = Field(default_factory=utcnow)
    traceparent: str | None = None

    @classmethod
    def action_name(cls) -> str:
        """The action of a concrete event class (its `action` field's fixed value)."""
        field = cls.model_fields.get("action")
        if field is None or not isinstance(field.default, str):
            raise TypeError(f"{cls.__qualname__} is not a concrete event (no fixed action)")
        return field.default

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        field = cls.model_fields.get("action")
        if field is not None and isinstance(field.default, str):
            EVENTS.register(cls)


#: Every aggregate class whose module is imported, by aggregate type.
AGGREGATES: dict[str, type[Aggregate]] = {}


class Aggregate(BaseModel):
    """A consistency boundary: an id, a version, and the events its changes raised, which the
    unit of work drains into one atomic write. Its fields are its whole stored state, so the
    stored document and the views are derived from them, never listed again."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True, validate_assignment=True
    )

    aggregate_type: ClassVar[str]
    #: Where aggregates of this type are kept and published from: the API's collection (a path
    #: segment) and the CloudEvents source `/<collection>` of their events.
    collection: ClassVar[str]

    id: str = Field(default_factory=_aggregate_id, min_length=1, max_length=128)
    version: int = Field(default=1, ge=1)
    _events: list[DomainEvent] = PrivateAttr(default_factory=list)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        aggregate_type = cls.__dict__.get("aggregate_type")
        if isinstance(aggregate_type, str):
            if not isinstance(getattr(cls, "collection", None), str):
                raise TypeError(f"aggregate {cls.__qualname__} names no collection")
            AGGREGATES[aggregate_type] = cls

    @classmethod
    def source(cls) -> str:
        """The CloudEvents source path of this aggregate's events: `/<collection>`."""
        return f"/{cls.collection}"

    @classmethod
    def event_classes(cls) -> frozenset[type[DomainEvent]]:
        """The event classes registered for this aggregate type."""
        return frozenset(EVENTS.resolve(cls.aggregate_type, action)
                         for action in EVENTS.actions(cls.aggregate_type))

    @property
    def live(self) -> bool:
        """False once the aggregate is gone for its readers (a soft delete): reads and changes
        then answer as for one that never existed. Override it; True by default."""
        return True

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
        """Hook: a change happened at `at` (an aggregate may keep it, as `modified_at`)."""
