"""The session's batch limits are counted as it is staged, in the SDK's JSON (compact, a
character outside ASCII escaped: its default): what it counts is at least what the batch is (so
a batch over 2 MB is always measured, and refused), whatever the strings hold (non-ASCII, outside
the Basic Multilingual Plane, quotes, control characters), and a batch counted over the limit is
measured exactly, so one that fits is written. What is not JSON is refused when it is staged,
naming it. (The contract suite, `SessionContract`, holds the stores to the same at the
limits.)"""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cosmos_outbox import _session as _session_module
from cosmos_outbox._records import reserved_property
from cosmos_outbox._session import (
    MAX_BATCH_BYTES,
    Session,
    _Sequences,
)
from cosmos_outbox.errors import BatchTooLargeError
from cosmos_outbox.ports import BatchOperation

#: Strings whose JSON is longest for their length among them: characters escaped `\\u0000`
#: (6 bytes), outside the BMP (two escapes, 12 bytes), quotes; and long ones.
texts = st.text(min_size=1, max_size=24) | st.text(
    st.sampled_from('\x00\x1f"\\é€😀a'), min_size=1, max_size=400
)
entities = st.from_regex(r"[a-z][A-Za-z0-9]{0,12}", fullmatch=True)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)


def _exact(batch: list[BatchOperation]) -> int:
    """The batch's documents as the SDK sends them (compact JSON, ASCII): what the limit is."""
    return len(
        json.dumps(
            [op.document if op.document is not None else op.patch for op in batch],
            separators=(",", ":"),
        ).encode()
    )


def _session(partition_key: str, entity: str, **options: Any) -> Session:
    return Session(
        None,  # type: ignore[arg-type]
        partition_key,
        entity=entity,
        event_ttl_seconds=3600,
        idempotency_ttl_seconds=86400,
        sequences=_Sequences(),
        **options,
    )


@settings(max_examples=100, deadline=None)
@given(
    partition_key=texts,
    entity=entities,
    session_id=st.none() | texts,
    source=st.none() | texts,
    traceparent=st.none() | texts,
    documents=st.lists(st.dictionaries(texts, values, max_size=5), max_size=3),
    patches=st.lists(
        st.tuples(
            texts, st.lists(st.dictionaries(texts, values, max_size=3), min_size=1, max_size=2)
        ),
        max_size=2,
    ),
    deletes=st.lists(texts, max_size=2),
    events=st.lists(
        st.tuples(
            texts,
            st.none() | texts,
            st.dictionaries(texts, values, max_size=4),
            st.dictionaries(texts.map(lambda t: "p" + t), st.integers() | texts, max_size=3),
        ),
        max_size=3,
    ),
    claim=st.none() | st.tuples(texts, st.dictionaries(texts, values, max_size=3), values),
    known=st.none() | st.tuples(st.integers(0, 2**62), texts),
)
def test_what_is_counted_as_staged_is_at_most_the_batch(
    partition_key: str,
    entity: str,
    session_id: str | None,
    source: str | None,
    traceparent: str | None,
    documents: list[dict[str, Any]],
    patches: list[tuple[str, list[dict[str, Any]]]],
    deletes: list[str],
    events: list[tuple[str, str | None, dict[str, Any], dict[str, Any]]],
    claim: tuple[str, dict[str, Any], Any] | None,
    known: tuple[int, str] | None,
) -> None:
    # a session id (the partition key unless given) is at most 128 UTF-16 units
    session_id = session_id or partition_key
    assume(len(session_id.encode("utf-16-le")) <= 256)
    session = _session(
        partition_key, entity, session_id=session_id, source=source, traceparent=traceparent
    )
    for n, document in enumerate(documents):
        session.upsert({**document, "id": f"doc-{n}", "partitionKey": partition_key})
    for document_id, operations in patches:
        session.patch(document_id, operations)
    for document_id in deletes:
        session.delete(document_id)
    for action, subject, body, properties in events:
        own = {k: v for k, v in properties.items() if not reserved_property(k, entity)}
        session.publish(action, body, subject=subject, properties=own)
    if claim is not None:
        key, request, answer = claim
        session.claim(key, request=request, answer=answer)
    counted = session._bytes_at_most()
    batch, _ = session._batch(session._operations, session._events, known, session._claim, bound=0)
    assert counted >= _exact(batch)


def test_a_batch_counted_over_the_limit_is_measured_and_written_when_it_fits() -> None:
    # a partition key of 200 characters: counted at 12 bytes each in the sequence's and the
    # event's documents, where it is 200
    session = _session("k" * 200, "booking", session_id="s1")
    session.create({"id": "wide", "note": "x" * (MAX_BATCH_BYTES - 3000)})
    session.publish("Noted", {"n": 1})
    assert session._bytes_at_most() > MAX_BATCH_BYTES
    batch, _ = session._batch(
        session._operations, session._events, None, None, bound=session._bytes_at_most()
    )
    assert _exact(batch) < MAX_BATCH_BYTES

    session.create({"id": "more", "note": "é" * 600})  # 3,600 bytes escaped: now over
    with pytest.raises(BatchTooLargeError, match="bytes"):
        session._batch(
            session._operations, session._events, None, None, bound=session._bytes_at_most()
        )


def test_what_is_not_json_is_refused_when_staged_naming_it() -> None:
    session = _session("p1", "booking")
    with pytest.raises(TypeError, match="document 'b1' is not JSON"):
        session.create({"id": "b1", "when": object()})
    with pytest.raises(TypeError, match="the event's data is not JSON"):
        session.publish("Held", {"at": {1, 2}})
    held: dict[str, Any] = {"id": "b2"}
    held["self"] = held
    with pytest.raises(TypeError, match="document 'b2' is not JSON"):
        session.create(held)
    with pytest.raises(TypeError, match="the answer is not JSON"):
        session.claim("k", request={"a": 1}, answer=object())
    assert session._operations == [] and session._events == []


WORST = "😀" * 300  # 12 bytes a character in JSON: the longest a string can be for its length


@pytest.mark.parametrize(
    "field",
    [
        "partition_key",
        "session_id",
        "source",
        "traceparent",
        "action",
        "subject",
        "property",
        "claim",
        "all",
    ],
)
def test_a_string_at_its_longest_in_json_is_counted_whole(field: str) -> None:
    """Each string of the session and its event at its longest JSON, alone and all at once: the
    count is at most the batch, whichever one it is."""

    def value(name: str, plain: str) -> str:
        return WORST if field in (name, "all") else plain

    session = _session(
        value("partition_key", "p1"),
        "booking",
        # a session id is at most 128 UTF-16 units (Service Bus's SessionId)
        session_id=WORST[:64] if field in ("session_id", "all") else "s1",
        source=value("source", "/b"),
        traceparent=value("traceparent", "00-trace"),
    )
    session.publish(
        value("action", "Held"),
        {"n": 1},
        subject=value("subject", "b1"),
        properties={"channel": value("property", "web")},
    )
    if field in ("claim", "all"):
        session.claim(WORST, request=WORST, answer=WORST)
    for known in (None, (2**62, WORST)):
        batch, _ = session._batch(
            session._operations, session._events, known, session._claim, bound=0
        )
        assert session._bytes_at_most() >= _exact(batch)


def test_the_shortest_strings_leave_the_documents_fixed_part_counted() -> None:
    """Strings of one character: what every outbox document holds besides them (keys, ids, a
    time, numbers at their longest) is what is left to count, for each of many events."""
    session = _session("p", "e", session_id="s", source="/")
    for _ in range(40):
        session.publish("A", {}, subject="x", properties={"c": 2**62})
    batch, _ = session._batch(session._operations, session._events, (2**62, "x"), None, bound=0)
    assert session._bytes_at_most() >= _exact(batch)


@pytest.mark.parametrize(
    ("properties", "reason"),
    [
        ({"note": "x" * 40 * 1024}, "application property 'note' is 40960 bytes"),
        ({f"p{i}": "x" * 25 * 1024 for i in range(3)}, "header"),
    ],
)
def test_properties_service_bus_would_refuse_at_every_send_are_refused_at_publish(
    properties: dict[str, str], reason: str
) -> None:
    """Refused where the app can still answer for it, not at the relay (issue 44): a property's
    value over 32 KB, or properties whose header would be over 64 KB. Nothing is staged."""
    session = _session("p1", "booking")
    with pytest.raises(ValueError, match=reason) as refused:
        session.publish("Held", {"n": 1}, properties=properties)
    assert "could never be sent" in str(refused.value)
    fresh = _session("p1", "booking")
    assert session._events == [] and session._bytes_at_most() == fresh._bytes_at_most()
    session.publish("Held", {"n": 1}, properties={"note": "x" * 30 * 1024})  # under: staged
    assert len(session._events) == 1


def test_a_body_or_document_of_any_mapping_is_staged_as_a_dict() -> None:
    session = _session("p1", "booking")
    session.create(MappingProxyType({"id": "b1", "seats": 2}))
    session.publish("Held", MappingProxyType({"seatId": "s1"}))
    batch, _ = session._batch(session._operations, session._events, None, None, bound=0)
    assert batch[0].document == {"id": "b1", "seats": 2}
    assert batch[2].document is not None and batch[2].document["body"] == '{"seatId":"s1"}'


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_a_number_json_cannot_hold_is_refused_when_staged(number: float) -> None:
    """Cosmos DB refuses NaN and infinities (JSON has none): refused here, naming where."""
    session = _session("p1", "booking")
    with pytest.raises(TypeError, match="document 'b1' is not JSON"):
        session.create({"id": "b1", "price": number})
    with pytest.raises(TypeError, match="the event's data is not JSON"):
        session.publish("Priced", {"price": number})
    assert session._operations == [] and session._events == []


def test_without_the_c_encoder_the_same_is_counted_and_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An interpreter without json's C encoder measures with `json.JSONEncoder.encode`."""
    document = {"id": "b1", "note": 'é😀\x00"', "seats": [1, 2.5, None, True]}
    counted = _session_module._json_bytes(document, "document")
    monkeypatch.setattr(_session_module, "_C_ENCODER", None)
    assert (
        _session_module._json_bytes(document, "document")
        == counted
        == len(json.dumps(document, separators=(",", ":")))
    )
    with pytest.raises(TypeError, match="document 'b1' is not JSON"):
        _session_module._json_bytes({"price": float("nan")}, "document", "b1")
