"""The claim check's payload store suite."""

from __future__ import annotations

import uuid

import pytest

from cosmos_outbox.errors import PayloadNotFoundError, PayloadReferenceError, PayloadStoreError
from cosmos_outbox.relay import OutboxRecord, payload_name
from cosmos_outbox_testing.contracts._worlds import PayloadWorld, Suite


def _payload_record(
    aggregate_type: str = "manuscript", aggregate_id: str | None = None, event_id: str | None = None
) -> OutboxRecord:
    return OutboxRecord(
        event_id=event_id or str(uuid.uuid4()),
        aggregate_type=aggregate_type,
        aggregate_id=aggregate_id or str(uuid.uuid4()),
        action="Revised",
        version=1,
        event_source="/manuscripts",
        body=b"{}",
    )


class PayloadStoreContract(Suite[PayloadWorld]):
    """The claim check's payload store: what the relay puts under an event's name comes back,
    byte for byte, by its reference; retries overwrite; nothing else is fetched."""

    def test_a_body_comes_back_byte_for_byte_by_its_reference(self, world: PayloadWorld) -> None:
        name = payload_name(_payload_record())
        body = b'{"text":"' + bytes(range(32, 127)) * 16_000 + b'"}'  # ~1.5 MB
        reference = world.payloads.reference(name)
        world.payloads.put(name, body, content_type="application/json")
        assert world.payloads.get(reference) == body
        assert world.payloads.reference(name) == reference  # the same for every retry

    def test_a_reference_is_known_before_the_body_is_stored(self, world: PayloadWorld) -> None:
        name = payload_name(_payload_record())
        reference = world.payloads.reference(name)
        with pytest.raises(PayloadNotFoundError):
            world.payloads.get(reference)
        world.payloads.put(name, b"{}", content_type="application/json")
        assert world.payloads.get(reference) == b"{}"

    def test_a_retry_overwrites_the_same_name(self, world: PayloadWorld) -> None:
        name = payload_name(_payload_record())
        world.payloads.put(name, b'{"a":1}', content_type="application/json")
        world.payloads.put(name, b'{"a":1}', content_type="application/json")
        assert world.payloads.get(world.payloads.reference(name)) == b'{"a":1}'
        world.payloads.put(name, b'{"a":2}', content_type="application/json")
        assert world.payloads.get(world.payloads.reference(name)) == b'{"a":2}'

    def test_each_event_has_a_name_of_its_own_whatever_its_ids(self, world: PayloadWorld) -> None:
        records = [
            _payload_record("a", "b/c", "d"),
            _payload_record("a/b", "c", "d"),
            _payload_record("a", "b", "c/d"),
            _payload_record("a", "b c%2F", "d?x#y"),
        ]
        names = [payload_name(r) for r in records]
        assert len(set(names)) == len(names)
        assert len({world.payloads.reference(n) for n in names}) == len(names)
        for i, name in enumerate(names):
            world.payloads.put(name, b'{"i":%d}' % i, content_type="application/json")
        for i, name in enumerate(names):
            assert world.payloads.get(world.payloads.reference(name)) == b'{"i":%d}' % i

    def test_a_reference_of_another_store_is_refused_not_fetched(self, world: PayloadWorld) -> None:
        for reference in (
            world.foreign_reference,
            "https://attacker.example/outbox/x",
            "not a url",
            world.payloads.reference("x") + "?sig=abc",
            world.payloads.reference("a/../../other-container/x"),
        ):
            with pytest.raises(PayloadReferenceError):
                world.payloads.get(reference)

    def test_a_store_that_is_down_fails_both_ways_and_works_again_after(
        self, world: PayloadWorld
    ) -> None:
        name = payload_name(_payload_record())
        world.payloads.put(name, b"{}", content_type="application/json")
        with world.outage():
            with pytest.raises(PayloadStoreError) as put_failed:
                world.payloads.put(name, b"{}", content_type="application/json")
            assert not isinstance(put_failed.value, PayloadNotFoundError)
            with pytest.raises(PayloadStoreError) as get_failed:
                world.payloads.get(world.payloads.reference(name))
            assert not isinstance(get_failed.value, PayloadNotFoundError)
        world.payloads.put(name, b"[]", content_type="application/json")
        assert world.payloads.get(world.payloads.reference(name)) == b"[]"
