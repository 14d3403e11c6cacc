"""Checks driven by an app's registered aggregates and declared routes, for its fast tests: a
mapping left out fails one of them, by name, instead of a request in production.

    def test_every_event_maps_to_the_document_the_message_and_back() -> None:
        check_event_mappings(outbox.aggregates)

Each raises AssertionError naming what is missing.

- `check_event_mappings(aggregates)`: every event class of every aggregate becomes its stored
  document and back, and a Service Bus message that the official CloudEvents SDK reads as the
  same event (type, source, subject, data);
- `check_openapi_events(document, aggregates)`: the OpenAPI document lists exactly the events
  of the aggregates, each with the schema its class publishes;
- `check_commands(app)`: every declared change route's request fields are keyword parameters
  of the aggregate method it calls (a PATCH field the aggregate does not accept would be a
  500); run on example aggregates, every create records an event and
  every change that alters the state records one (else the write would be refused);
- `check_fields(aggregate, patch=..., kept=...)`: every field of the aggregate a client sets
  travels in its creation event, can be changed through the PATCH model, and has one change
  event of its own;
- `check_text_schemas(models)`: every text field (`cosmos_outbox.text.Text`) of the models
  publishes a schema (pattern, lengths) that accepts and refuses what its validation does.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

import azure.functions as func
from pydantic import BaseModel, TypeAdapter, ValidationError

from cosmos_outbox.aggregates import Aggregate, DomainError, Event
from cosmos_outbox.bridge import SuspendedError, run_sync
from cosmos_outbox.documents import aggregate_event_document, read_feed
from cosmos_outbox.http import Command, operation_of
from cosmos_outbox.relay import OutboxRecord, to_message
from cosmos_outbox.text import Text

__all__ = [
    "ENVELOPE",
    "check_commands",
    "check_event_mappings",
    "check_fields",
    "check_openapi_events",
    "check_text_schemas",
    "example",
    "example_event",
]

#: The fields every event has (not a change of the aggregate).
#: An event's envelope, not its data: the `Event` model's own fields.
ENVELOPE = frozenset(Event.model_fields)
#: The fields every aggregate keeps itself.
_BOOKKEEPING = frozenset({"id", "version"})
_STRINGS = ("Ada", "A", "ada@example.com", "ABC", "1", "2026-01-02", "a-1")
_INTEGERS = (2, 1, 0, 100)


def example(annotation: Any, variant: int = 0) -> Any:
    """A valid value of a field type: the first candidate its validation accepts (for a model,
    a value of each of its fields); `variant` n takes the n-th accepted one instead (cycling),
    so two variants of a model differ where their types allow."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return example(next(a for a in typing.get_args(annotation) if a is not type(None)), variant)
    if origin is Literal:
        choices = typing.get_args(annotation)
        return choices[variant % len(choices)]
    bare = typing.get_args(annotation)[0] if origin is typing.Annotated else annotation
    if isinstance(bare, type) and issubclass(bare, BaseModel):
        return _example_model(bare, variant)
    candidates: tuple[Any, ...] = {
        str: _STRINGS,
        int: _INTEGERS,
        bool: (True, False),
        datetime: (
            datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
            datetime(2026, 2, 3, 4, 5, 6, tzinfo=UTC),
        ),
    }.get(bare, ())
    adapter: TypeAdapter[Any] = TypeAdapter(annotation)
    accepted = []
    for candidate in candidates:
        try:
            accepted.append(adapter.validate_python(candidate))
        except ValidationError:
            continue
    if not accepted:
        raise AssertionError(
            f"no example value of {annotation!r}: give the field a default or "
            "extend cosmos_outbox_testing._checks.example"
        )
    return accepted[variant % len(accepted)]


def _example_model(model: type[BaseModel], variant: int) -> BaseModel:
    """Every field set; else (a model validator refusing that) the required fields, alone, then
    with one optional field each."""
    values = {
        name: example(f.rebuild_annotation(), variant) for name, f in model.model_fields.items()
    }
    required = {n for n, f in model.model_fields.items() if f.is_required()}
    attempts = [set(values), required, *({*required, n} for n in values if n not in required)]
    error: ValidationError | None = None
    for names in attempts:
        try:
            return model.model_validate({n: v for n, v in values.items() if n in names})
        except ValidationError as exc:
            error = error or exc
    raise AssertionError(f"no example of {model.__name__}: {error}")


def example_event(kind: type[Event], aggregate_id: str = "agg-1") -> Event:
    """An instance of an event class with example values, at version 2."""
    fields = {
        name: example(f.rebuild_annotation())
        for name, f in kind.model_fields.items()
        if name not in ENVELOPE
    }
    return kind.model_validate({"aggregate_id": aggregate_id, "version": 2, **fields})


def _events(aggregates: Iterable[type[Aggregate]]) -> Iterator[tuple[type[Aggregate], type[Event]]]:
    for aggregate in aggregates:
        events = sorted(aggregate.event_classes(), key=lambda e: e.action_name())
        assert events, f"{aggregate.__qualname__} has no event class"
        for event in events:
            yield aggregate, event


def check_event_mappings(aggregates: Iterable[type[Aggregate]]) -> None:
    """Every event class: document and back; message; the official CloudEvents SDK's reading
    of the message is the same event."""
    for aggregate, kind in _events(aggregates):
        try:
            _check_event_mapping(aggregate, kind)
        except AssertionError:
            raise
        except Exception as exc:  # a mapping that fails outright: named, like one that differs
            raise AssertionError(f"{kind.action_name()}: {type(exc).__name__}: {exc}") from exc


def _check_event_mapping(aggregate: type[Aggregate], kind: type[Event]) -> None:
    from cloudevents.core.bindings.amqp import AMQPMessage, from_binary
    from cloudevents.core.formats.json import JSONFormat

    from cosmos_outbox.servicebus import application_properties
    from cosmos_outbox_testing._committed import incoming

    action = kind.action_name()
    event = example_event(kind)
    document = json.loads(
        json.dumps(aggregate_event_document(event, source=aggregate.source(), ttl_seconds=60))
    )
    assert (document["aggregateType"], document["partitionKey"]) == (
        aggregate.aggregate_type,
        "agg-1",
    ), f"{action}: document envelope"
    [record] = read_feed([document])
    assert isinstance(record, OutboxRecord), f"{action}: unreadable document: {record}"
    message = to_message(record)
    assert (message.subject, message.session_id, message.message_id) == (
        action,
        "agg-1",
        event.id,
    ), f"{action}: Subject, SessionId, MessageId"
    properties = application_properties(message)
    assert properties["aggregateType"] == aggregate.aggregate_type
    assert properties[f"{aggregate.aggregate_type}Id"] == "agg-1"
    cloudevent = from_binary(
        AMQPMessage(
            properties={"content-type": message.content_type},
            application_properties=properties,
            application_data=message.body,
        ),
        JSONFormat(),
    )
    assert (cloudevent.get_type(), cloudevent.get_source(), cloudevent.get_subject()) == (
        action,
        aggregate.source(),
        "agg-1",
    ), f"{action}: CloudEvents attributes"
    data = cloudevent.get_data()
    assert isinstance(data, dict), f"{action}: CloudEvent data is not an object"
    assert data == event.model_dump(mode="json", by_alias=True, exclude=set(ENVELOPE)), (
        f"{action}: the CloudEvent's data is not the event's own fields"
    )
    assert aggregate.parse_event(incoming(message).envelope_and_data()) == event, (
        f"{action}: the message does not read back as the event"
    )


def check_openapi_events(
    document: Mapping[str, Any], aggregates: Iterable[type[Aggregate]]
) -> None:
    """The document's `x-events` are exactly the events of `aggregates`, each with how it
    travels and the schema its class publishes."""
    listed = {e["action"]: e for e in document.get("x-events", [])}
    by_action = {kind.action_name(): (aggregate, kind) for aggregate, kind in _events(aggregates)}
    missing = sorted(set(by_action) - set(listed))
    assert not missing, f"events missing from the OpenAPI document: {missing}"
    extra = sorted(set(listed) - set(by_action))
    assert not extra, f"the OpenAPI document lists events of no registered aggregate: {extra}"
    schemas = document["components"]["schemas"]
    for action, (aggregate, kind) in by_action.items():
        entry = listed[action]
        assert (entry["aggregateType"], entry["subject"], entry["source"], entry["sessionId"]) == (
            aggregate.aggregate_type,
            action,
            aggregate.source(),
            f"{aggregate.aggregate_type}Id",
        ), f"{action}: how it travels"
        published = kind.model_json_schema(
            by_alias=True, mode="serialization", ref_template="#/components/schemas/{model}"
        )
        for name, schema in published.pop("$defs", {}).items():
            assert schemas.get(name) == schema, f"{action}: schema {name} differs"
        assert schemas.get(action) == published, f"{action}: its schema differs from its class"


def _commands(
    app: func.FunctionRegister,
) -> Iterator[tuple[str, Command, type[BaseModel] | None, bool]]:
    """Each command of the route helper: its name, what it does, its request model, and whether
    its function is an `async def` one (an `aio` outbox's: its callables may be async)."""
    from cosmos_outbox_testing._functions import _indexed

    for function in _indexed(app):
        user = function.get_user_function()
        operation = operation_of(user)
        if operation is not None and operation.command is not None:
            yield (
                operation.name,
                operation.command,
                operation.request,
                inspect.iscoroutinefunction(user),
            )


def _runner(asynchronous: bool) -> Callable[[object], Any]:
    """What a route does with what a callable returned (a user's callable may return an
    awaitable or not): an async route awaits it on an event loop (here, one of its own); a sync
    route awaits one that needs no I/O (SuspendedError if it waits on I/O)."""

    async def resolved(value: object) -> Any:
        return await value if inspect.isawaitable(value) else value

    return (
        (lambda v: asyncio.run(resolved(v))) if asynchronous else (lambda v: run_sync(resolved(v)))
    )


def name_of(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))


def check_commands(app: func.FunctionRegister) -> None:
    """Every command declared with the route helper, checked before it ships:

    - each change route's request fields are keyword parameters of the aggregate method it
      calls (a field the method does not accept would be a 500);
    - run on an example aggregate (the one its type's create route builds from an example
      body) with two example bodies: a create records an event, and a change that alters the
      aggregate's state records one too (else the write is refused: 500). A DomainError (a
      business rule refusing the example) is no failure."""
    commands = list(_commands(app))
    assert commands, "the app declares no route with the route helper (AggregateRoutes)"
    # (a coroutine function given to a sync route is refused by the route helper itself, when
    # the route is declared: no app that imports has one)
    for name, command, request, _ in commands:
        if command.verb != "change" or request is None or command.derived:
            continue
        parameters = inspect.signature(command.apply).parameters.values()
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            continue
        accepted = {
            p.name
            for p in parameters
            if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        }
        refused = sorted(set(request.model_fields) - accepted)
        assert not refused, (
            f"{name}: {request.__name__} has fields {refused} that "
            f"{name_of(command.apply)} does not accept: a request sending them would fail (500)"
        )
    built = {
        command.aggregate: _created(name, command, request, _runner(asynchronous))
        for name, command, request, asynchronous in commands
        if command.verb == "create"
    }
    for name, command, request, asynchronous in commands:
        aggregate = built.get(command.aggregate)
        if command.verb == "change" and aggregate is not None:
            for variant in (0, 1):
                _check_change(name, command, request, aggregate, variant, _runner(asynchronous))


def _created(
    name: str, command: Command, request: type[BaseModel] | None, run: Callable[[object], Any]
) -> Aggregate:
    body = example(request) if request is not None else None
    try:
        aggregate = run(command.apply(body))
    except Exception as exc:
        raise AssertionError(
            f"{name}: building the {command.aggregate.aggregate_type} from an "
            f"example body failed: {type(exc).__name__}: {exc}"
        ) from exc
    assert isinstance(aggregate, command.aggregate), (
        f"{name}: {name_of(command.apply)} returned {type(aggregate).__name__}, not a "
        f"{command.aggregate.__name__}"
    )
    assert aggregate.events, (
        f"{name}: {name_of(command.apply)} makes a {aggregate.aggregate_type} that records no "
        "event: the create would be refused (500)"
    )
    aggregate.collect_events()
    return aggregate


def _check_change(
    name: str,
    command: Command,
    request: type[BaseModel] | None,
    aggregate: Aggregate,
    variant: int,
    run: Callable[[object], Any],
) -> None:
    target = aggregate.model_copy(deep=True)
    kwargs: Mapping[str, Any] = {}
    if request is not None:
        body = example(request, variant)
        kwargs = (
            run(command.changes(body))
            if command.changes is not None
            else {field: getattr(body, field) for field in body.model_fields_set}
        )
    before = target.model_dump(mode="json")
    try:
        run(command.apply(target, **kwargs))
    except DomainError:
        return
    except SuspendedError as exc:
        raise AssertionError(f"{name}: {name_of(command.apply)} waits on I/O: {exc}") from exc
    after = target.model_dump(mode="json")
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed or target.events, (
        f"{name}: {name_of(command.apply)} changes {changed} of the "
        f"{target.aggregate_type} without recording an event: the write would be refused "
        "(500); record the event that says what happened"
    )


def check_fields(
    aggregate: type[Aggregate], *, patch: type[BaseModel] | None = None, kept: Iterable[str] = ()
) -> None:
    """The fields of `aggregate` a client sets (all but `id`, `version` and `kept`, which the
    aggregate keeps itself): each travels in the creation event; with a `patch` model, each can
    be changed through it and has one change event that carries just it."""
    settable = set(aggregate.model_fields) - _BOOKKEEPING - set(kept)
    unknown = set(kept) - set(aggregate.model_fields)
    assert not unknown, f"{aggregate.__qualname__} has no fields {sorted(unknown)}"
    events = {k: set(k.model_fields) - ENVELOPE for k in aggregate.event_classes()}
    creations = [k for k, fields in events.items() if fields >= settable]
    assert creations, (
        f"no event of {aggregate.__qualname__} carries every field a client "
        f"sets: {sorted(settable)}"
    )
    if patch is None:
        return
    assert set(patch.model_fields) == settable, (
        f"{patch.__name__} changes {sorted(patch.model_fields)}; the fields a client sets are "
        f"{sorted(settable)}"
    )
    for field in sorted(settable):
        carriers = [k for k, fields in events.items() if fields == {field}]
        assert carriers, f"no event carries a change of {field} alone"


def _texts(annotation: Any) -> Iterator[Text]:
    for meta in getattr(annotation, "__metadata__", ()):
        if isinstance(meta, Text):
            yield meta


def _text_fields(
    model: type[BaseModel], seen: set[type[BaseModel]]
) -> Iterator[tuple[type[BaseModel], str]]:
    if model in seen:
        return
    seen.add(model)
    for name, field in model.model_fields.items():
        annotation = field.rebuild_annotation()
        if any(True for _ in _texts(annotation)) or any(
            isinstance(m, Text) for m in field.metadata
        ):
            yield model, name
        for inner in _nested_models(annotation):
            yield from _text_fields(inner, seen)


def _nested_models(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _nested_models(arg)


#: Values that probe every text rule and the usual field patterns.
_PROBES = (
    # empty, blank, cased, padded, a control character
    *("", " ", "Ada", "ada", "ADA", "A", "1", "a b", "  Ada  ", "Ada\u0000"),
    # invisible, combining marks, joiners, emoji sequences, replacement, private use
    *("\u200b", "\u2800", "\u0301a", "a\u0301", "\u0915\u094d\u200d\u0937", "\u200d"),
    "Zo\u00eb \U0001f469\u200d\U0001f52c",
    "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
    *("\ufffd", "\ue000"),
    # lengths around 10, and the usual patterns (codes, dates)
    *("x" * 9, "x" * 10, "x" * 11, "ab-12", "AB12", "ab_12.c", "2026-01-02"),
)


def _schema_accepts(schema: Mapping[str, Any], value: str) -> bool:
    patterns = [schema.get("pattern")] + [s.get("pattern") for s in schema.get("allOf", [])]
    if any(p is not None and re.search(p, value) is None for p in patterns):
        return False
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        return False
    return not ("minLength" in schema and len(value) < schema["minLength"])


def check_text_schemas(models: Iterable[type[BaseModel]]) -> None:
    """Every text field of `models` (and of the models they nest): its published JSON schema
    and its validation agree on a set of probe values (each rule of the text, lengths around
    10, common patterns)."""
    seen: set[type[BaseModel]] = set()
    checked = 0
    for model, name in (pair for m in models for pair in _text_fields(m, seen)):
        field = model.model_fields[name]
        annotation = field.rebuild_annotation()
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        schema = adapter.json_schema(mode="validation")
        if "anyOf" in schema:  # an optional field: its string branch
            schema = next(s for s in schema["anyOf"] if s.get("type") == "string")
        limit = next((t.max_length for t in _texts(annotation)), 10)
        for probe in (*_PROBES, "y" * limit, "y" * (limit + 1)):
            try:
                adapter.validate_python(probe)
                valid = True
            except ValidationError:
                valid = False
            published = _schema_accepts(schema, probe)
            assert valid == published, (
                f"{model.__name__}.{name}: {probe!r} is {'accepted' if valid else 'refused'} "
                f"by validation but {'accepted' if published else 'refused'} by the published "
                "schema"
            )
        checked += 1
    assert checked, "no text field found in the models"
