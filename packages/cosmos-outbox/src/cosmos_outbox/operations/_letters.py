"""A dead letter as the operators' API reads, selects and answers it: what it is (`Described`,
read by the mapper from its properties: `describe`), which ones an action names (`LetterFilter`,
`Selection`), and the results the ways in render (`DeadLetterCounts`, `LetterSummary`,
`DeadLetterMessage`, `ActionReport`, `LetterPreview`). The use cases are `_dead_letters`'."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Self

from cosmos_outbox._mapper import SentFields, sent_fields
from cosmos_outbox._model import Model, of_attributes
from cosmos_outbox.operations._deliveries import Received
from cosmos_outbox.operations._failure_view import FailureView
from cosmos_outbox.ports import DeadLetter, Outgoing

__all__ = [
    "ActionReport",
    "DeadLetterCounts",
    "DeadLetterMessage",
    "Described",
    "EntityCount",
    "Handled",
    "HandledLetter",
    "LetterFilter",
    "LetterPreview",
    "LetterSummary",
    "Selection",
    "describe",
    "enqueued",
]


@dataclass(frozen=True, kw_only=True)
class Described(SentFields):
    """What a dead letter is, read from its properties (`SentFields`: the outbox's event, or
    notice, it carries, when it is one), and the dead letter."""

    letter: DeadLetter

    @property
    def is_outbox_message(self) -> bool:
        return bool(self.aggregate_type and self.aggregate_id and self.version)

    @property
    def event_source(self) -> str:
        """Its CloudEvents source path (the aggregate type's collection when it names none)."""
        return self.source or f"/{self.aggregate_type}s"


def describe(letter: DeadLetter) -> Described:
    """What a dead letter is (the mapper reads its properties: `sent_fields`)."""
    found = sent_fields(
        letter.application_properties,
        message_id=letter.message_id,
        session_id=letter.session_id,
        subject=letter.subject,
    )
    return Described(**vars(found), letter=letter)


@dataclass(frozen=True)
class LetterFilter:
    """Which dead letters: of an aggregate type (and one aggregate), an action, a reason
    (found, ignoring case, in the dead-letter reason or its description), enqueued in a time
    range. Nothing set: every one."""

    aggregate_type: str | None = None
    aggregate_id: str | None = None
    action: str | None = None
    reason: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def matches(self, described: Described) -> bool:
        letter = described.letter
        if self.aggregate_type is not None and described.aggregate_type != self.aggregate_type:
            return False
        if self.aggregate_id is not None and described.aggregate_id != self.aggregate_id:
            return False
        if self.action is not None and described.action != self.action:
            return False
        if self.reason is not None:
            wanted = self.reason.casefold()
            found = f"{letter.reason or ''}\n{letter.description or ''}".casefold()
            if wanted not in found:
                return False
        at = letter.enqueued_at
        if self.since is not None and (at is None or at < self.since.timestamp()):
            return False
        return not (self.until is not None and (at is None or at >= self.until.timestamp()))

    @property
    def empty(self) -> bool:
        return self == LetterFilter()


@dataclass(frozen=True)
class Selection:
    """Dead letters named by their sequence numbers, or all matching a filter (`every`: all of
    them, said explicitly)."""

    sequence_numbers: tuple[int, ...] = ()
    filter: LetterFilter = field(default_factory=LetterFilter)
    every: bool = False


class EntityCount(Model):
    """How many dead letters a watched subscription (or queue) holds, and when that was read:
    with `error` (its dead-letter queue could not be read now), the last count known, read at
    `counted_at` (None and null: none known since the app started)."""

    name: str
    kind: str
    #: the count read at `counted_at` (with `error`: the last known; None: none known)
    dead_letters: int | None
    #: the count stopped at COUNT_LIMIT: there are at least that many
    at_least: bool
    #: why the queue could not be read now (null: the count is this answer's)
    error: str | None = None
    #: when the count was read (null: never)
    counted_at: datetime | None = None


class DeadLetterCounts(Model):
    """How many dead letters each watched subscription (and queue) holds."""

    entities: list[EntityCount]


@dataclass(frozen=True)
class Handled:
    """One dead letter an action handled: what was sent for it, and the outcome (None: done)."""

    described: Described
    sent: Outgoing | None
    outcome: str | None


class HandledLetter(Model):
    """A dead letter an action handled: the MessageId of what was sent for it (its resubmission,
    or its discard notice), and why it was not done (null: done; else it stays in its queue)."""

    sequence_number: int
    event_id: str | None
    aggregate_type: str | None
    aggregate_id: str | None
    version: int | None
    sent_message_id: str | None
    failure: str | None

    @classmethod
    def of(cls, handled: Handled) -> HandledLetter:
        return of_attributes(
            cls,
            handled.described,
            sequence_number=handled.described.letter.sequence_number,
            sent_message_id=handled.sent.message_id if handled.sent is not None else None,
            failure=handled.outcome,
        )


class ActionReport(Model):
    """What a resubmit or a discard did: the dead letters handled (done or not, and why), how
    many matching ones remain (call again), and what subscribers will see."""

    action: str
    entity: str
    done: int
    failed: int
    remaining: int
    handled: list[HandledLetter]
    subscribers_will_see: str
    #: what each subscription of the topic received of what was sent, as its rules decide
    deliveries: list[Received] = []


class LetterSummary(Model):
    """A dead letter, summarised: what it is (the outbox's event or notice it carries, when it
    is one), why it was dead-lettered, how often it was delivered, when it was enqueued."""

    sequence_number: int
    message_id: str | None
    event_id: str | None
    aggregate_type: str | None
    aggregate_id: str | None
    action: str | None
    version: int | None
    session_id: str | None
    dead_letter_reason: str | None
    dead_letter_description: str | None
    delivery_count: int
    enqueued_time: datetime | None
    resubmissions: int

    @classmethod
    def of(cls, described: Described) -> Self:
        return of_attributes(cls, described, **_letter_fields(described.letter))


class DeadLetterMessage(LetterSummary):
    """One dead letter, whole: its body (text when it is UTF-8, else base64), content type,
    subject and application properties besides the summary."""

    content_type: str | None
    subject: str | None
    body: str
    body_encoding: str
    application_properties: dict[str, Any]
    #: its failure record and history, when failures are kept as data (OUTBOX_FAILURE_INGEST)
    failure: FailureView | None = None

    @classmethod
    def of(cls, described: Described, failure: FailureView | None = None) -> Self:
        letter = described.letter
        try:
            body, encoding = letter.body.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            body, encoding = base64.b64encode(letter.body).decode("ascii"), "base64"
        return of_attributes(
            cls,
            described,
            **_letter_fields(letter),
            content_type=letter.content_type,
            subject=letter.subject,
            body=body,
            body_encoding=encoding,
            failure=failure,
            application_properties={
                str(k): v if isinstance(v, str | int | float | bool) or v is None else str(v)
                for k, v in letter.application_properties.items()
            },
        )


def _letter_fields(letter: DeadLetter) -> dict[str, Any]:
    """A summary's fields the dead letter itself holds (the rest are what it carries)."""
    return {
        "sequence_number": letter.sequence_number,
        "message_id": letter.message_id,
        "session_id": letter.session_id,
        "dead_letter_reason": letter.reason,
        "dead_letter_description": letter.description,
        "delivery_count": letter.delivery_count,
        "enqueued_time": enqueued(letter),
    }


def enqueued(letter: DeadLetter) -> datetime | None:
    at = letter.enqueued_at
    return datetime.fromtimestamp(at, UTC) if at is not None else None


#: Dead letters a preview shows one by one.
PREVIEW_ITEMS = 10


class LetterPreview(Model):
    """What a resubmit or a discard of a selection would touch, before it is confirmed: how many
    dead letters match at that subscription (or queue), how many one call handles (the rest
    are handled by calling again), the first of them, their aggregates, and what subscribers
    will see. Nothing is sent or removed."""

    action: Literal["resubmit", "discard"]
    entity: str
    kind: str
    matching: int
    #: the count stopped at its limit: at least that many match
    at_least: bool
    per_call: int
    aggregates: int
    first: list[LetterSummary]
    #: dead letters that are not outbox events (a discard removes them with no notice)
    not_outbox_messages: int
    subscribers_will_see: str
    #: what each subscription of the topic would receive, as its rules decide
    deliveries: list[Received] = []
