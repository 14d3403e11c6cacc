"""The domain core: aggregates, the events they record, and the base of business-rule errors.

An aggregate is a pydantic model of its whole stored state. Its type (`aggregate_type`) and
collection (the API's path segment and the CloudEvents source `/<collection>`) are derived from
its class name (`Order`: `order`, `orders`) unless it sets them. Its events are classes bound to
it with its `event` decorator; each event's action is its class name unless the decorator names
it, and on the wire the aggregate's id is `<aggregateType>Id` (`orderId`). A change records its
event with `record`, which gives the event the aggregate's next version:

    class Order(Aggregate):
        status: Literal["placed", "cancelled"] = "placed"

        def cancel(self) -> None:
            self.status = "cancelled"
            self.record(OrderCancelled)

    @Order.event
    class OrderCancelled(Event): ...

Every bound event class registers itself in a catalogue by aggregate type and action, so the
stored document, the message and the OpenAPI document are derived from the classes, never kept
by hand.

Events and aggregates (and their subclasses) are built by pydantic on first use (`defer_build`):
a worker indexing an app defines every class and validates none of them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal, Self, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator
from pydantic.alias_generators import to_camel

from cosmos_outbox.clock import now as _now

A = TypeVar("A", bound="Aggregate")
E = TypeVar("E", bound="Event")

__all__ = ["Aggregate", "DomainError", "Event"]


class DomainError(Exception):
    """Base of every business-rule violation an aggregate raises (answered 409 by the HTTP
    layer, with the error's message as the detail)."""


#: The variant digit of a UUID (RFC 4122: 8, 9, a or b) for a random hex digit: its 2 low bits.
_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def new_id() -> str:
    """A random (version 4) UUID as text, as `str(uuid.uuid4())` writes it, without building a
    `uuid.UUID` (in under half the time: an id is made for every event): 122 random bits, the
    version digit 4 and the variant digit."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


#: The last second `utc_text` wrote, and its text up to the seconds.
_SECOND: tuple[int, str] = (-1, "")


def utc_text(nanoseconds: int | None = None) -> str:
    """The instant `nanoseconds` after the epoch (now when not given) as `datetime.isoformat()`
    writes it in UTC (`2026-11-23T21:26:05.123456+00:00`; no fraction on a whole second), in
    under half its time: the text up to the second is made once a second. The time of every
    event a transaction writes."""
    global _SECOND
    if nanoseconds is None:
        nanoseconds = time.time_ns()
    second, micro = nanoseconds // 1_000_000_000, nanoseconds // 1000 % 1_000_000
    known = _SECOND
    if known[0] != second:
        known = _SECOND = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{known[1]}.{micro:06d}+00:00" if micro else f"{known[1]}+00:00"


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
    """Now, UTC (the test kit's clock when one stands in: `cosmos_outbox.clock`)."""
    return _now()


def due_time(
    deliver_at: datetime | None, deliver_after: timedelta | None, *, now: datetime | None = None
) -> datetime | None:
    """When a scheduled event is due: `deliver_at` (an aware datetime: a naive one says no
    clock, ValueError), or `deliver_after` from `now` (now when not given); None for an event
    sent once committed. Both given: ValueError. A time in the past is allowed: the event is
    delivered at once."""
    if deliver_after is not None:
        if deliver_at is not None:
            raise ValueError("give deliver_at or deliver_after, not both")
        if not isinstance(deliver_after, timedelta):
            raise TypeError(f"deliver_after is a timedelta, not {type(deliver_after).__name__}")
        return (now or utcnow()) + deliver_after
    if deliver_at is None:
        return None
    if not isinstance(deliver_at, datetime):
        raise TypeError(f"deliver_at is a datetime, not {type(deliver_at).__name__}")
    if deliver_at.tzinfo is None or deliver_at.utcoffset() is None:
        raise ValueError(
            f"deliver_at {deliver_at.isoformat()} is naive: give an aware datetime "
            "(datetime.now(UTC) + ..., or with its tzinfo) so that it names one instant"
        )
    return deliver_at


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
    """Every bound event class, by aggregate type and action, filled as the classes are bound."""

    def __init__(self) -> None:
        self._by_type: dict[str, dict[str, type[Event]]] = {}

    def register(self, kind: type[Event]) -> None:
        aggregate_type = kind.aggregate_type
        action = kind.action_name()
        known = self._by_type.setdefault(aggregate_type, {})
        same = known.get(action)
        if same is not None and (same.__module__, same.__qualname__) != (
            kind.__module__,
            kind.__qualname__,
        ):
            raise TypeError(
                f"{kind.__qualname__} and {same.__qualname__} both have the "
                f"{aggregate_type} action {action!r}"
            )
        known[action] = kind

    def resolve(self, aggregate_type: str, action: object) -> type[Event]:
        """The class of an event. Raises UnknownEventError."""
        found = (
            self._by_type.get(aggregate_type, {}).get(action) if isinstance(action, str) else None
        )
        if found is None:
            raise UnknownEventError(aggregate_type, action)
        return found

    def parse(self, aggregate_type: str, data: Mapping[str, Any]) -> Event:
        """An event from its data as stored and sent (camelCase, with its `action`)."""
        return self.resolve(aggregate_type, data.get("action")).model_validate(data)

    def actions(self, aggregate_type: str) -> frozenset[str]:
        return frozenset(self._by_type.get(aggregate_type, {}))

    def __iter__(self) -> Iterator[type[Event]]:
        for events in self._by_type.values():
            yield from events.values()


#: The events of every aggregate whose module is imported.
EVENTS = EventCatalogue()


class Event(BaseModel):
    """Something that happened to one aggregate: its id, the aggregate's id, the aggregate's
    `version` after it, when, the trace context of the request that caused it, and its
    `action`. Subclass it with the event's own fields and bind the class to its aggregate with
    the aggregate's `event` decorator; `Aggregate.record` fills the rest.

    A scheduled event (`deliver_at`: when it is due, recorded with `record(..., deliver_at=...)`
    or `deliver_after=`) has `version` 0: it takes no place in the aggregate's order."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        defer_build=True,
    )

    #: The type of the aggregate the event happened to (set when the class is bound).
    aggregate_type: ClassVar[str]

    id: str = Field(default_factory=new_id)
    aggregate_id: str
    version: int = Field(ge=0)
    created_at: datetime = Field(default_factory=utcnow)
    traceparent: str | None = None
    #: What happened: the bound class's action (its class name unless the binding named it).
    action: str = ""
    #: When a scheduled event is due (aware); None: sent as soon as it is committed.
    deliver_at: datetime | None = None

    @model_validator(mode="after")
    def _scheduled_events_take_no_version(self) -> Self:
        if self.deliver_at is None and self.version < 1:
            raise ValueError("version: an event that is not scheduled has a version of at least 1")
        if self.deliver_at is not None:
            if self.version != 0:
                raise ValueError(
                    "version: a scheduled event (deliver_at) has version 0: it takes no place "
                    "in its aggregate's order"
                )
            if self.deliver_at.tzinfo is None:
                raise ValueError(
                    "deliver_at: give an aware datetime (a naive one names no instant)"
                )
        return self

    @classmethod
    def action_name(cls) -> str:
        """The action of a bound event class."""
        action = cls.model_fields["action"].default
        if not isinstance(action, str) or not action:
            raise TypeError(
                f"{cls.__qualname__} is not bound to an aggregate: decorate it with "
                "its aggregate's event decorator (@Order.event)"
            )
        return action

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if "aggregate_type" in cls.__dict__:
            EVENTS.register(cls)


#: Every aggregate class whose module is imported, by aggregate type.
AGGREGATES: dict[str, type[Aggregate]] = {}


class Aggregate(BaseModel):
    """A consistency boundary: an id, a version, and the events its changes recorded, which the
    unit of work writes with it in one atomic batch. Its fields are its whole stored state, so
    the stored document and the views are derived from them, never listed again.

    `aggregate_type` and `collection` default to the class name with a lower-case first letter
    and that name plus `s` (`Order`: `order`, `orders`); set them on the class to choose."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        validate_assignment=True,
        defer_build=True,
    )

    aggregate_type: ClassVar[str]
    #: Where aggregates of this type are kept and published from: the API's collection (a path
    #: segment) and the CloudEvents source `/<collection>` of their events.
    collection: ClassVar[str]

    id: str = Field(default_factory=_aggregate_id, min_length=1, max_length=128)
    version: int = Field(default=1, ge=1)
    _events: list[Event] = PrivateAttr(default_factory=list)
    #: the ids of the scheduled events this change cancels (`cancel_scheduled`)
    _cancels: list[str] = PrivateAttr(default_factory=list)
    #: True until the first event is recorded, False for an aggregate read from the store.
    _new: bool = PrivateAttr(default=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        name = cls.__name__
        if "aggregate_type" not in cls.__dict__:
            cls.aggregate_type = name[:1].lower() + name[1:]
        if "collection" not in cls.__dict__:
            cls.collection = f"{cls.aggregate_type}s"
        AGGREGATES[cls.aggregate_type] = cls

    @overload
    @classmethod
    def event(cls, event: type[E], /) -> type[E]: ...

    @overload
    @classmethod
    def event(cls, event: str, /) -> Callable[[type[E]], type[E]]: ...

    @classmethod
    def event(cls, event: type[E] | str, /) -> type[E] | Callable[[type[E]], type[E]]:
        """Bind an event class to this aggregate: `@Order.event` (the action is the class
        name) or `@Order.event("OrderPlacedEvent")` (the action named). The class becomes
        this aggregate's, with `<aggregateType>Id` on the wire, and is registered."""
        if isinstance(event, str):
            action = event
            return lambda kind: cls._bind(kind, action)
        return cls._bind(event, event.__name__)

    @classmethod
    def _bind(cls, kind: type[E], action: str) -> type[E]:
        if not (isinstance(kind, type) and issubclass(kind, Event)):
            raise TypeError(f"{cls.__qualname__}.event binds Event subclasses, not {kind!r}")
        if "aggregate_type" in kind.__dict__:
            raise TypeError(f"{kind.__qualname__} is bound to {kind.aggregate_type} already")
        namespace: dict[str, Any] = {
            "__module__": kind.__module__,
            "__qualname__": kind.__qualname__,
            "__doc__": kind.__doc__,
            "__annotations__": {"action": Literal[action]},
            "action": action,
            "aggregate_type": cls.aggregate_type,
            "model_config": ConfigDict(alias_generator=event_aliases(cls.aggregate_type)),
        }
        bound: type[E] = type(kind.__name__, (kind,), namespace)
        return bound

    @classmethod
    def source(cls) -> str:
        """The CloudEvents source path of this aggregate's events: `/<collection>`."""
        return f"/{cls.collection}"

    @classmethod
    def event_classes(cls) -> frozenset[type[Event]]:
        """The event classes bound to this aggregate type."""
        return frozenset(
            EVENTS.resolve(cls.aggregate_type, action)
            for action in EVENTS.actions(cls.aggregate_type)
        )

    @classmethod
    def parse_event(cls, data: Mapping[str, Any]) -> Event:
        """One of this aggregate's events from its data as stored and sent (camelCase, with its
        `action`). Raises LookupError for an action it has no event class of."""
        return EVENTS.parse(cls.aggregate_type, data)

    @property
    def live(self) -> bool:
        """False once the aggregate is gone for its readers (a soft delete): reads and changes
        then answer as for one that never existed. Override it; True by default."""
        return True

    @property
    def events(self) -> list[Event]:
        """The events recorded and not yet collected, in the order they happened."""
        return list(self._events)

    def collect_events(self) -> list[Event]:
        """Hand over the recorded events (in the order they happened) and forget them, and the
        cancels (`cancel_scheduled`) with them."""
        drained, self._events, self._cancels = self._events, [], []
        return drained

    def cancel_scheduled(self, event_id: str) -> None:
        """Cancel a scheduled event of this aggregate (one it recorded with `deliver_at` or
        `deliver_after` in an earlier change: keep its id, `record`'s answer) with this change:
        committed in the same batch, it is never sent. The unit of work reads the event when it
        commits: NotFoundError (no such event: expired), ValueError (not scheduled),
        TooLateToCancelError (its due time came and it was released) fail the commit, nothing
        written. Cancelled already: nothing to do."""
        if not isinstance(event_id, str) or not event_id:
            raise ValueError("cancel_scheduled takes the id of a scheduled event")
        if event_id not in self._cancels:
            self._cancels.append(event_id)

    @property
    def cancels(self) -> list[str]:
        """The ids of the scheduled events this change cancels, not yet committed."""
        return list(self._cancels)

    def record(
        self,
        event: type[E],
        /,
        *,
        at: datetime | None = None,
        deliver_at: datetime | None = None,
        deliver_after: timedelta | None = None,
        **fields: Any,
    ) -> E:
        """Record that `event` happened (now, or `at`); the event recorded. The first event of a
        new aggregate is at version 1; every other one takes the next version. The event's own
        fields are `fields`, and for those not given, the aggregate's fields of the same name as
        they are now. `on_recorded` runs after.

        With `deliver_at` (an aware datetime) or `deliver_after` (a timedelta from now) the
        event is **scheduled**: committed with the change, delivered when it is due (at once
        when that is past), never once cancelled (`Transaction.cancel(event.id)` in a later
        transaction of the aggregate's partition). It takes no place in the aggregate's order:
        version 0, and the aggregate's version does not move for it. A naive datetime, or
        both, is a ValueError here."""
        at = at or utcnow()
        due = due_time(deliver_at, deliver_after, now=at)
        if due is not None:
            if self._new:
                raise ValueError(
                    f"{type(self).__name__} {self.id} is new: record the event that creates it "
                    f"(its version 1) before a scheduled one ({event.__name__})"
                )
            return self._recorded(event, fields, version=0, at=at, deliver_at=due)
        if self._new:
            self._new = False
        else:
            self.version += 1
        return self._recorded(event, fields, version=self.version, at=at)

    def _recorded(
        self,
        event: type[E],
        fields: dict[str, Any],
        *,
        version: int,
        at: datetime | None,
        deliver_at: datetime | None = None,
    ) -> E:
        own = type(self).model_fields
        values = {
            name: getattr(self, name)
            for name in event.model_fields
            if name not in fields and name not in _ENVELOPE and name in own
        }
        recorded = event.model_validate(
            {
                **values,
                **fields,
                "aggregate_id": self.id,
                "version": version,
                "created_at": at or utcnow(),
                "deliver_at": deliver_at,
            }
        )
        self._events.append(recorded)
        self.on_recorded(recorded)
        return recorded

    def on_recorded(self, event: Event) -> None:
        """Runs after each event is recorded (an aggregate may keep its time as
        `modified_at`, for instance). Does nothing by default."""


def read_back(aggregate: A) -> A:
    """`aggregate`, marked as read from the store: its next event takes the next version."""
    aggregate._new = False
    return aggregate


#: The fields every event has: never taken from the aggregate.
_ENVELOPE = frozenset(Event.model_fields)
