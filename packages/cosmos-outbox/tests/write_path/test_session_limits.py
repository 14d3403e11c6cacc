"""A transaction's batch limits are counted as it is staged, in the SDK's JSON (compact, a
character outside ASCII escaped: its default): what it counts is at least what the batch is (so
a batch over 2 MB is always measured, and refused), whatever the strings hold (non-ASCII, outside
the Basic Multilingual Plane, quotes, control characters), and a batch counted over the limit is
measured exactly, so one that fits is written. What is not JSON is refused when it is staged,
naming it. (The write path's contract suite, `WritePathContract`, holds the stores to the same
at the limits.)"""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from cosmos_outbox._mapper import reserved_property
from cosmos_outbox._write.batch import MAX_BATCH_BYTES, json_bytes
from cosmos_outbox._write.streams import Sequences
from cosmos_outbox._write.transaction import Transaction
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


def _transaction(partition_key: str, entity: str, **options: Any) -> Transaction:
    return Transaction(
        None,  # type: ignore[arg-type]
        partition_key,
        entity=entity,
        event_ttl_seconds=3600,
        idempotency_ttl_seconds=86400,
        sequences=Sequences(),
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
    key=st.none() | st.tuples(texts, st.dictionaries(texts, values, max_size=3), values),
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
    key: tuple[str, dict[str, Any], Any] | None,
    known: tuple[int, str] | None,
) -> None:
    # a tx id (the partition key unless given) is at most 128 UTF-16 units
    session_id = session_id or partition_key
    assume(len(session_id.encode("utf-16-le")) <= 256)
    tx = _transaction(
        partition_key, entity, session_id=session_id, source=source, traceparent=traceparent
    )
    for n, document in enumerate(documents):
        tx.upsert({**document, "id": f"doc-{n}", "partitionKey": partition_key})
    for document_id, operations in patches:
        tx.patch(document_id, operations)
    for document_id in deletes:
        tx.delete(document_id)
    for action, subject, body, properties in events:
        own = {k: v for k, v in properties.items() if not reserved_property(k, entity)}
        tx.publish(action, body, subject=subject, properties=own)
    if key is not None:
        value, request, answer = key
        tx.remember(value, request=request, answer=answer)
    batch = tx._batch(known)
    assert batch.bound >= _exact(batch.operations)


def test_a_batch_counted_over_the_limit_is_measured_and_written_when_it_fits() -> None:
    # a partition key of 200 characters: counted at 12 bytes each in the sequence's and the
    # event's documents, where it is 200
    tx = _transaction("k" * 200, "booking", session_id="s1")
    tx.create({"id": "wide", "note": "x" * (MAX_BATCH_BYTES - 3000)})
    tx.publish("Noted", {"n": 1})
    batch = tx._batch(None)
    assert batch.bound > MAX_BATCH_BYTES
    batch.check()  # measured: it fits
    assert _exact(batch.operations) < MAX_BATCH_BYTES

    tx.create({"id": "more", "note": "é" * 600})  # 3,600 bytes escaped: now over
    with pytest.raises(BatchTooLargeError, match="bytes"):
        tx._batch(None).check()


def test_what_is_not_json_is_refused_when_staged_naming_it() -> None:
    tx = _transaction("p1", "booking")
    with pytest.raises(TypeError, match="document 'b1' is not JSON"):
        tx.create({"id": "b1", "when": object()})
    with pytest.raises(TypeError, match="the event's data is not JSON"):
        tx.publish("Held", {"at": {1, 2}})
    held: dict[str, Any] = {"id": "b2"}
    held["self"] = held
    with pytest.raises(TypeError, match="document 'b2' is not JSON"):
        tx.create(held)
    with pytest.raises(TypeError, match="the answer is not JSON"):
        tx.remember("k", request={"a": 1}, answer=object())
    assert not tx._staged()


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
        "key",
        "all",
    ],
)
def test_a_string_at_its_longest_in_json_is_counted_whole(field: str) -> None:
    """Each string of the tx and its event at its longest JSON, alone and all at once: the
    count is at most the batch, whichever one it is."""

    def value(name: str, plain: str) -> str:
        return WORST if field in (name, "all") else plain

    tx = _transaction(
        value("partition_key", "p1"),
        "booking",
        # a tx id is at most 128 UTF-16 units (Service Bus's SessionId)
        session_id=WORST[:64] if field in ("session_id", "all") else "s1",
        source=value("source", "/b"),
        traceparent=value("traceparent", "00-trace"),
    )
    tx.publish(
        value("action", "Held"),
        {"n": 1},
        subject=value("subject", "b1"),
        properties={"channel": value("property", "web")},
    )
    if field in ("key", "all"):
        tx.remember(WORST, request=WORST, answer=WORST)
    for known in (None, (2**62, WORST)):
        batch = tx._batch(known)
        assert batch.bound >= _exact(batch.operations)


def test_the_shortest_strings_leave_the_documents_fixed_part_counted() -> None:
    """Strings of one character: what every outbox document holds besides them (keys, ids, a
    time, numbers at their longest) is what is left to count, for each of many events."""
    tx = _transaction("p", "e", session_id="s", source="/")
    for _ in range(40):
        tx.publish("A", {}, subject="x", properties={"c": 2**62})
    batch = tx._batch((2**62, "x"))
    assert batch.bound >= _exact(batch.operations)


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
    tx = _transaction("p1", "booking")
    with pytest.raises(ValueError, match=reason) as refused:
        tx.publish("Held", {"n": 1}, properties=properties)
    assert "could never be sent" in str(refused.value)
    assert not tx._staged() and tx._bytes == 0
    tx.publish("Held", {"n": 1}, properties={"note": "x" * 30 * 1024})  # under: staged
    assert len(tx._events) == 1


def test_a_body_or_document_of_any_mapping_is_staged_as_a_dict() -> None:
    tx = _transaction("p1", "booking")
    tx.create(MappingProxyType({"id": "b1", "seats": 2}))
    tx.publish("Held", MappingProxyType({"seatId": "s1"}))
    batch = tx._batch(None).operations
    assert batch[0].document == {"id": "b1", "seats": 2}
    assert batch[2].document is not None and batch[2].document["body"] == '{"seatId":"s1"}'


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_a_number_json_cannot_hold_is_refused_when_staged(number: float) -> None:
    """Cosmos DB refuses NaN and infinities (JSON has none): refused here, naming where."""
    tx = _transaction("p1", "booking")
    with pytest.raises(TypeError, match="document 'b1' is not JSON"):
        tx.create({"id": "b1", "price": number})
    with pytest.raises(TypeError, match="the event's data is not JSON"):
        tx.publish("Priced", {"price": number})
    assert not tx._staged()


@settings(max_examples=300, deadline=None)
@given(value=values)
# keys whose count is exact (a character outside the BMP is 12 bytes, `false` 5): nothing
# else's slack hides a dict's separators (found by Hypothesis in the release check's 3.11 run)
@example(value={"\U00010000": False, "\U00010001": False})
@example(value=[{"\U00010000": False, "\U00010001": False, "\U00010002": False}])
def test_a_value_is_counted_at_least_as_the_sdk_sends_it(value: Any) -> None:
    """Counted without serialising it (`json_bytes`): at least what json's public encoder
    writes, compact and in ASCII, as the SDK sends it: a dict's colons and commas too."""
    assert json_bytes(value, "document") >= len(json.dumps(value, separators=(",", ":")))


def test_what_json_refuses_is_refused_naming_it() -> None:
    """What json's encoder refuses (the SDK's serialiser), and only that: NaN and the
    infinities, a set, bytes, an object, a key of another type; a dict's int, float, bool and
    None keys and a tuple are written as json writes them."""
    for refused in (
        {"price": float("nan")},
        [float("-inf")],
        {"tags": {1, 2}},
        {"raw": b"x"},
        {"what": object()},
        {(1, 2): 3},
        {float("inf"): 1},
    ):
        with pytest.raises(TypeError, match="document 'b1' is not JSON"):
            json_bytes(refused, "document", "b1")
    taken = {2: 2, 1.5: (3, 4), True: None, None: [10**30]}
    assert json_bytes(taken, "document") >= len(json.dumps(taken, separators=(",", ":")))
