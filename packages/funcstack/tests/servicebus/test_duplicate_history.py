"""The duplicate-detection history of a topic or queue (``SenderEntity.is_duplicate``), without
a server: a MessageId is a duplicate inside the entity's window and new after it, and what
expired leaves the history on the next send, so the history holds one window of ids however
long the endpoint runs (Service Bus: "duplicate detection history time window")."""

from __future__ import annotations

import time

from funcstack.servicebus._broker import SenderEntity
from funcstack.servicebus._config import SenderEntityConfig


def _topic(window: float) -> SenderEntity:
    return SenderEntity(
        config=SenderEntityConfig("t", requires_duplicate_detection=True, duplicate_window=window),
        targets=[],
    )


def test_an_id_is_a_duplicate_inside_the_window_only() -> None:
    topic = _topic(60.0)
    assert not topic.is_duplicate("a")
    assert topic.is_duplicate("a")
    topic.seen["a"] = time.time() - 1  # its window is over
    assert not topic.is_duplicate("a")
    assert topic.is_duplicate("a")


def test_what_expired_leaves_the_history_on_the_next_send() -> None:
    topic = _topic(60.0)
    past = time.time() - 10
    for n in range(1000):
        topic.seen[f"old-{n}"] = past + n / 1000
    assert not topic.is_duplicate("new")
    assert list(topic.seen) == ["new"]


def test_an_expired_id_kept_behind_a_later_expiry_is_not_a_duplicate() -> None:
    topic = _topic(60.0)
    topic.seen["live"] = time.time() + 30
    topic.seen["stale"] = time.time() - 1  # out of order (a state file from another window)
    assert not topic.is_duplicate("stale")
    assert topic.is_duplicate("stale")
    assert topic.is_duplicate("live")


def test_without_duplicate_detection_nothing_is_kept() -> None:
    topic = SenderEntity(config=SenderEntityConfig("t"), targets=[])
    assert not topic.is_duplicate("a")
    assert not topic.is_duplicate("a")
    assert not topic.seen
