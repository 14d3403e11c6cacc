"""The quarantine kept as failure records (`cosmos_outbox._quarantine`, the module), on the test
kit's store: each quarantined event is also a `failedMessage` record of the pseudo-entity
`quarantine` in its cause's group (the quarantine's group id), its group's summary counted in
the same batch; the relay setting the same event aside twice (its lease read again) one record,
one attempt; a crash between the failure record and the quarantine record nothing counted twice
once the relay sets it aside again; a replay that fails again one more attempt, one that is sent
resolved, a discard archived with who and why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cosmos_outbox._causes import cause_of, group_id
from cosmos_outbox._mapper import read_feed
from cosmos_outbox._mapper.failure import FAILED_MESSAGE_TYPE, failure_id, failure_record
from cosmos_outbox._quarantine import QUARANTINE_TYPE, Quarantine
from cosmos_outbox._relay.forwarding import Relay
from cosmos_outbox._sync_over_async import as_async, run_sync
from cosmos_outbox.operations._failures import Failures
from cosmos_outbox_testing import FakePublisher, InMemoryStore
from relay.test_relay import TELEMETRY, history

#: The reason the relay gives an event whose version is no number (`cause_of` keeps it whole).
UNREADABLE = "event version"


class CrashBeforeQuarantine(InMemoryStore):
    """A store whose next `crashes` writes of a quarantine record fail (the process gone after
    the failure record was written, before the quarantine record)."""

    def __init__(self, crashes: int = 0) -> None:
        super().__init__()
        self.crashes = crashes

    def upsert(self, document: Any) -> dict[str, Any]:
        if document.get("type") == QUARANTINE_TYPE and self.crashes > 0:
            self.crashes -= 1
            raise ConnectionResetError("the relay's host stopped")
        return super().upsert(document)


def kept(store: InMemoryStore) -> tuple[Quarantine, Failures]:
    failures = Failures(as_async(store), retention_seconds=60)
    return Quarantine(store, failures=failures), failures


def unreadable_event() -> list[dict[str, Any]]:
    [doc] = history(0)
    doc["version"] = "seven"
    return [doc]


def relayed(quarantine: Quarantine, docs: list[dict[str, Any]]) -> None:
    run_sync(Relay(FakePublisher(), quarantine, TELEMETRY).relay(read_feed(docs)))


def records(store: InMemoryStore) -> list[Any]:
    return [failure_record(d) for d in store.of_type(FAILED_MESSAGE_TYPE)]


def the_group(quarantine: Quarantine, failures: Failures, event_id: str) -> Any:
    """The summary of the group the quarantine's groups put the event in."""
    entry = run_sync(quarantine.get(event_id))
    cause = cause_of(entry.reason)
    return run_sync(
        failures.group(group_id("quarantine", None, cause, entry.aggregate_type, entry.action))
    )


def test_the_relay_setting_the_same_event_aside_twice_is_one_record_one_attempt() -> None:
    store = InMemoryStore()
    quarantine, failures = kept(store)
    docs = unreadable_event()
    relayed(quarantine, docs)
    relayed(quarantine, docs)  # the lease read again
    [record] = records(store)
    assert record.id == failure_id("quarantine", docs[0]["id"])
    assert (record.entity, record.entity_kind, record.event_id) == (
        "quarantine",
        "quarantine",
        docs[0]["id"],
    )
    assert UNREADABLE in (record.reason or "") and record.state == "open"
    assert record.attempt_count == 1
    group = the_group(quarantine, failures, docs[0]["id"])
    assert (group.open, group.entity_kind, group.group) == (1, "quarantine", record.group)


def test_a_crash_between_the_failure_record_and_the_quarantine_record_counts_once() -> None:
    store = CrashBeforeQuarantine(crashes=1)
    quarantine, failures = kept(store)
    docs = unreadable_event()
    with pytest.raises(ConnectionResetError):
        relayed(quarantine, docs)
    assert store.of_type(QUARANTINE_TYPE) == [] and len(records(store)) == 1
    relayed(quarantine, docs)  # the relay retries the event
    [record] = records(store)
    assert record.attempt_count == 1
    assert the_group(quarantine, failures, docs[0]["id"]).open == 1


def test_a_replay_failing_again_is_an_attempt_more_and_one_sent_or_discarded_settles_it() -> None:
    store = InMemoryStore()
    quarantine, failures = kept(store)
    docs = [*unreadable_event(), *unreadable_event()]
    relayed(quarantine, docs)
    first, second = (run_sync(quarantine.get(d["id"])) for d in docs)
    assert the_group(quarantine, failures, first.event_id).open == 2

    failed = run_sync(
        quarantine.replayed(first, resolved=False, reason=first.reason, ttl_seconds=60)
    )
    run_sync(quarantine.replayed(first, resolved=False, reason=first.reason, ttl_seconds=60))
    record = run_sync(failures.record(failure_id("quarantine", first.event_id)))
    assert record.attempt_count == 2 and record.state == "open"  # the same replay twice: once
    assert the_group(quarantine, failures, first.event_id).open == 2

    run_sync(quarantine.replayed(failed, resolved=True, reason="", ttl_seconds=60, by="ada"))
    record = run_sync(failures.record(failure_id("quarantine", first.event_id)))
    assert (record.state, record.ttl, record.history[-1].what) == ("resolved", 60, "replayed")
    group = the_group(quarantine, failures, first.event_id)
    assert (group.open, group.resolved) == (1, 1)

    run_sync(quarantine.discard(second, by="ada", reason="written by a bug", ttl_seconds=60))
    record = run_sync(failures.record(failure_id("quarantine", second.event_id)))
    note = record.history[-1]
    assert record.state == "archived"
    assert (note.what, note.by, note.note) == ("discarded", "ada", "written by a bug")
    group = the_group(quarantine, failures, first.event_id)
    assert (group.open, group.archived, group.resolved) == (0, 1, 1)


class CrashOnQuarantineReplace(InMemoryStore):
    """A store whose next `crashes` replaces of a quarantine record fail (a replay or a discard
    whose process stopped after its failure record was settled, before the quarantine record)."""

    def __init__(self, crashes: int = 0) -> None:
        super().__init__()
        self.crashes = crashes

    def replace(self, document: Any, *, if_match: str | None = None) -> dict[str, Any]:
        if document.get("type") == QUARANTINE_TYPE and self.crashes > 0:
            self.crashes -= 1
            raise ConnectionResetError("the operator's process stopped")
        return super().replace(document, if_match=if_match)


def counted_as_kept(quarantine: Quarantine, failures: Failures, event_id: str) -> None:
    """The quarantine's unresolved records all counted open by the failure groups' summaries
    (what the groups check before they trust them, `Quarantine.count`)."""
    assert run_sync(quarantine.count()) == the_group(quarantine, failures, event_id).open


def test_an_event_set_aside_again_after_its_replay_was_sent_is_one_more_attempt() -> None:
    store = InMemoryStore()
    quarantine, failures = kept(store)
    docs = unreadable_event()
    relayed(quarantine, docs)
    entry = run_sync(quarantine.get(docs[0]["id"]))
    run_sync(quarantine.replayed(entry, resolved=True, reason="", ttl_seconds=60, by="ada"))
    relayed(quarantine, docs)  # re-driven from the store, or the lease read again: fails again
    relayed(quarantine, docs)  # the same quarantine written twice: once
    record = run_sync(failures.record(failure_id("quarantine", docs[0]["id"])))
    assert (record.state, record.attempt_count, record.ttl) == ("open", 2, None)
    assert [n.what for n in record.history] == ["replayed", "quarantined again"]
    assert UNREADABLE in (record.history[-1].note or "")
    group = the_group(quarantine, failures, docs[0]["id"])
    assert (group.open, group.resolved) == (1, 0)
    counted_as_kept(quarantine, failures, docs[0]["id"])


@pytest.mark.parametrize("settled", ["resolved", "archived"])
def test_an_event_set_aside_again_after_a_replay_or_discard_stopped_halfway_reopens_it(
    settled: str,
) -> None:
    store = CrashOnQuarantineReplace()
    quarantine, failures = kept(store)
    docs = unreadable_event()
    relayed(quarantine, docs)
    entry = run_sync(quarantine.get(docs[0]["id"]))
    store.crashes = 1
    with pytest.raises(ConnectionResetError):
        if settled == "resolved":
            run_sync(quarantine.replayed(entry, resolved=True, reason="", ttl_seconds=60))
        else:
            run_sync(quarantine.discard(entry, by="ada", reason="a bug", ttl_seconds=60))
    record = run_sync(failures.record(failure_id("quarantine", docs[0]["id"])))
    assert record.state == settled  # its quarantine record still unresolved
    relayed(quarantine, docs)  # the relay sets the event aside again: a new failure
    relayed(quarantine, docs)  # written twice: once
    record = run_sync(failures.record(failure_id("quarantine", docs[0]["id"])))
    assert (record.state, record.attempt_count) == ("open", 2)
    assert record.history[-1].what == "quarantined again"
    group = the_group(quarantine, failures, docs[0]["id"])
    assert (group.open, group.resolved, group.archived) == (1, 0, 0)
    counted_as_kept(quarantine, failures, docs[0]["id"])


class Meanwhile(InMemoryStore):
    """A store that runs `meanwhile` (once) just before its next write of a quarantine record:
    another process's writes between a read of the record and the write over it."""

    def __init__(self) -> None:
        super().__init__()
        self.meanwhile: Callable[[], object] | None = None

    def _before(self, document: Any) -> None:
        if document.get("type") == QUARANTINE_TYPE and self.meanwhile is not None:
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()

    def upsert(self, document: Any) -> dict[str, Any]:
        self._before(document)
        return super().upsert(document)

    def replace(self, document: Any, *, if_match: str | None = None) -> dict[str, Any]:
        self._before(document)
        return super().replace(document, if_match=if_match)


def test_a_replay_sent_while_the_relay_sets_the_event_aside_again_leaves_them_agreeing() -> None:
    """The relay reads the quarantine record, finds the attempt kept, and a replay is sent and
    resolves both records before the relay writes the quarantine record: the relay's write
    meets the replay's, reads again, and opens the record again (one more attempt)."""
    store = Meanwhile()
    quarantine, failures = kept(store)
    docs = unreadable_event()
    relayed(quarantine, docs)
    entry = run_sync(quarantine.get(docs[0]["id"]))
    store.meanwhile = lambda: run_sync(
        quarantine.replayed(entry, resolved=True, reason="", ttl_seconds=60, by="ada")
    )
    relayed(quarantine, docs)  # the lease read again, the event set aside again
    assert run_sync(quarantine.get(docs[0]["id"])).status == "quarantined"
    record = run_sync(failures.record(failure_id("quarantine", docs[0]["id"])))
    assert (record.state, record.attempt_count) == ("open", 2)
    assert [n.what for n in record.history] == ["replayed", "quarantined again"]
    counted_as_kept(quarantine, failures, docs[0]["id"])


@pytest.mark.parametrize("settled", ["resolved", "archived"])
def test_the_relay_setting_the_event_aside_during_a_replay_or_discard_is_settled_with_it(
    settled: str,
) -> None:
    """A replay (or a discard) settles the failure record, the relay sets the event aside again
    (opening it again) and writes its quarantine record, then the replay writes: it meets the
    relay's write, reads again and settles the record again; both records agree."""
    store = Meanwhile()
    quarantine, failures = kept(store)
    docs = unreadable_event()
    relayed(quarantine, docs)
    entry = run_sync(quarantine.get(docs[0]["id"]))
    store.meanwhile = lambda: relayed(quarantine, docs)
    if settled == "resolved":
        run_sync(quarantine.replayed(entry, resolved=True, reason="", ttl_seconds=60, by="ada"))
    else:
        run_sync(quarantine.discard(entry, by="ada", reason="a bug", ttl_seconds=60))
    status = run_sync(quarantine.get(docs[0]["id"])).status
    assert status == ("resolved" if settled == "resolved" else "discarded")
    record = run_sync(failures.record(failure_id("quarantine", docs[0]["id"])))
    assert (record.state, record.attempt_count) == (settled, 2)
    assert [n.what for n in record.history][-2:] == ["quarantined again", record.history[0].what]
    group = the_group(quarantine, failures, docs[0]["id"])
    assert (group.open, group.resolved + group.archived) == (0, 1)
    counted_as_kept(quarantine, failures, docs[0]["id"])
