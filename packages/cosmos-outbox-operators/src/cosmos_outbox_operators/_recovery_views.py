"""The recovery routes' path parameters, request models and answers (dead letters, the
journey, the documents, the subscribers' holds): the JSON views of the core's operations'
results (`cosmos_outbox.operations`); the routes themselves are `_recovery_routes`'."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Self

from pydantic import ConfigDict, Field, model_validator

from cosmos_outbox.http import (
    Identifier,
    Model,
    PageView,
    PathParameter,
    RequestModel,
    omit_null_defaults,
)
from cosmos_outbox.operations import (
    ActionReport,
    Described,
    LetterFilter,
    Notice,
    Selection,
)
from cosmos_outbox.text import Text
from cosmos_outbox_operators._types import (
    AggregateType,
    Instant,
    OperatorReason,
)

if TYPE_CHECKING:
    from cosmos_outbox.operations import (
        Discarded,
        SubscriberView,
    )


ENTITY = PathParameter("entity", "the subscription or queue")
SEQUENCE = PathParameter(
    "sequenceNumber", "the dead letter's sequence number", pattern=r"^[0-9]{1,19}$", max_length=19
)
SUBSCRIPTION = PathParameter("subscription", "the subscription")
AGGREGATE_TYPE = PathParameter(
    "aggregateType", "the aggregate type", pattern=r"^[A-Za-z][A-Za-z0-9]{0,63}$", max_length=64
)
AGGREGATE_ID = PathParameter("aggregateId", "the aggregate id")
PARAMETERS = {p.name: p for p in (ENTITY, SEQUENCE, SUBSCRIPTION, AGGREGATE_TYPE, AGGREGATE_ID)}
_ERRORS = (400, 404, 429, 500, 503)


# -- views ---------------------------------------------------------------------------------------


#: A notice an action sent (the core's `Notice`).
NoticeView = Notice


class DiscardView(Model):
    """The answer to a discard of a quarantined event: what was given up, by whom, the notice
    sent, and what subscribers will see."""

    event_id: str
    aggregate_type: str | None
    aggregate_id: str
    action: str | None
    version: int | None
    status: str
    reason: str
    discarded_by: str | None
    discarded_at: datetime | None
    notice: Notice | None
    subscribers_will_see: str

    @classmethod
    def of(cls, discarded: Discarded) -> DiscardView:
        entry = discarded.entry
        return cls(
            event_id=entry.event_id,
            aggregate_type=entry.aggregate_type,
            aggregate_id=entry.aggregate_id,
            action=entry.action,
            version=entry.version,
            status=entry.status,
            reason=entry.discard_reason or "",
            discarded_by=entry.discarded_by,
            discarded_at=entry.discarded_at,
            notice=Notice.of(discarded.notice) if discarded.notice is not None else None,
            subscribers_will_see=discarded.subscribers_will_see,
        )


class EntityCountView(Model):
    name: str
    kind: str
    dead_letters: int | None
    #: the count stopped at its limit: there are at least that many
    at_least: bool
    error: str | None = None


class DeadLetterCountsView(Model):
    entities: list[EntityCountView]


class DeadLetterItem(Model):
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
    def of(cls, described: Described) -> DeadLetterItem:
        letter = described.letter
        return cls(
            sequence_number=letter.sequence_number,
            message_id=letter.message_id,
            event_id=described.event_id,
            aggregate_type=described.aggregate_type,
            aggregate_id=described.aggregate_id,
            action=described.action,
            version=described.version,
            session_id=letter.session_id,
            dead_letter_reason=letter.reason,
            dead_letter_description=letter.description,
            delivery_count=letter.delivery_count,
            enqueued_time=(
                datetime.fromtimestamp(letter.enqueued_at, UTC)
                if letter.enqueued_at is not None
                else None
            ),
            resubmissions=described.resubmissions,
        )


class DeadLetterPage(PageView):
    items: list[DeadLetterItem]


class DeadLetterView(DeadLetterItem):
    """One dead letter, whole: its body (text when it is UTF-8, else base64), content type,
    subject and application properties besides the summary."""

    content_type: str | None
    subject: str | None
    body: str
    body_encoding: str
    application_properties: dict[str, Any]

    @classmethod
    def whole(cls, described: Described) -> DeadLetterView:
        letter = described.letter
        try:
            body, encoding = letter.body.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            body, encoding = base64.b64encode(letter.body).decode("ascii"), "base64"
        return cls(
            **DeadLetterItem.of(described).model_dump(),
            content_type=letter.content_type,
            subject=letter.subject,
            body=body,
            body_encoding=encoding,
            application_properties={
                str(k): v if isinstance(v, str | int | float | bool) or v is None else str(v)
                for k, v in letter.application_properties.items()
            },
        )


class HandledView(Model):
    sequence_number: int
    event_id: str | None
    aggregate_type: str | None
    aggregate_id: str | None
    version: int | None
    #: the MessageId of what was sent for it (the resubmission, or the discard notice)
    sent_message_id: str | None
    #: null: done; else why not (it stays in the dead-letter queue)
    failure: str | None


class DeadLetterActionView(Model):
    """What a resubmit or a discard did: the dead letters handled (done or not, and why), how
    many matching ones remain (call again), and what subscribers will see."""

    action: str
    entity: str
    done: int
    failed: int
    remaining: int
    handled: list[HandledView]
    subscribers_will_see: str

    @classmethod
    def of(cls, report: ActionReport) -> DeadLetterActionView:
        return cls(
            action=report.action,
            entity=report.entity.name,
            done=len(report.done),
            failed=len(report.failed),
            remaining=report.remaining,
            handled=[
                HandledView(
                    sequence_number=h.described.letter.sequence_number,
                    event_id=h.described.event_id,
                    aggregate_type=h.described.aggregate_type,
                    aggregate_id=h.described.aggregate_id,
                    version=h.described.version,
                    sent_message_id=h.sent.message_id if h.sent is not None else None,
                    failure=h.outcome,
                )
                for h in report.handled
            ],
            subscribers_will_see=report.subscribers_will_see,
        )


FilterText = Annotated[str, Text(max_length=200)]


_FILTER_FIELDS = ("aggregateType", "aggregateId", "action", "deadLetterReason", "since", "until")
_NO_FILTER: dict[str, Any] = dict.fromkeys(_FILTER_FIELDS, False)
#: The three ways to name dead letters, as JSON Schema: a field that must be left out is `false`.
_ONE_WAY: list[dict[str, Any]] = [
    {
        "required": ["sequenceNumbers"],
        "properties": {"sequenceNumbers": {"minItems": 1}, "all": {"const": False}, **_NO_FILTER},
    },
    {
        "anyOf": [{"required": [name]} for name in _FILTER_FIELDS],
        "properties": {"sequenceNumbers": {"maxItems": 0}, "all": {"const": False}},
    },
    {
        "required": ["all"],
        "properties": {"all": {"const": True}, "sequenceNumbers": {"maxItems": 0}, **_NO_FILTER},
    },
]


class DeadLetterSelection(RequestModel):
    """Which dead letters: `sequenceNumbers` (at most 100), or those matching a filter (an
    aggregate type and id, an action, text in the dead-letter reason or description, enqueued
    since / until), or `all: true`; exactly one of the three (the schema says so too)."""

    model_config = ConfigDict(json_schema_extra=omit_null_defaults({"oneOf": _ONE_WAY}))

    sequence_numbers: Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=100)] = []
    aggregate_type: AggregateType | None = None
    aggregate_id: Identifier | None = None
    action: Identifier | None = None
    dead_letter_reason: FilterText | None = None
    since: Instant | None = None
    until: Instant | None = None
    all: bool = False

    @model_validator(mode="after")
    def _one_way(self) -> Self:
        ways = [bool(self.sequence_numbers), not self.filter.empty, self.all]
        if sum(ways) != 1:
            raise ValueError(
                "name the dead letters one way: sequenceNumbers, or a filter (aggregateType, "
                "aggregateId, action, deadLetterReason, since, until), or all: true"
            )
        return self

    @property
    def filter(self) -> LetterFilter:
        return LetterFilter(
            aggregate_type=self.aggregate_type,
            aggregate_id=self.aggregate_id,
            action=self.action,
            reason=self.dead_letter_reason,
            since=self.since,
            until=self.until,
        )

    @property
    def selection(self) -> Selection:
        return Selection(tuple(self.sequence_numbers), self.filter, self.all)


class DeadLetterDiscard(DeadLetterSelection):
    """A selection of dead letters to give up, and why (the audit line, the notices)."""

    reason: OperatorReason


class ReleaseRequest(RequestModel):
    """Give one version of an aggregate up at one subscription, and why."""

    aggregate_type: AggregateType
    aggregate_id: Identifier
    version: Annotated[int, Field(ge=1)]
    reason: OperatorReason


class HeldView(Model):
    aggregate_type: str | None
    aggregate_id: str
    last_applied: int
    missing_version: int
    held_versions: list[int]
    held_since: datetime | None
    reason: str
    release: str
    quarantined_event_id: str | None


class AcceptedGapView(Model):
    aggregate_type: str | None
    aggregate_id: str
    version: int
    event_id: str | None
    action: str | None
    reason: str | None
    discarded_by: str | None
    accepted_at: datetime | None
    subscription: str | None


class SubscriberStatusView(Model):
    subscription: str
    dead_letters: int | None
    dead_letters_at_least: bool
    dead_letters_error: str | None
    #: whether the app knows this subscriber's projection container (OUTBOX_SUBSCRIPTIONS)
    known: bool
    held_events: int | None
    held: list[HeldView]
    accepted_gaps: list[AcceptedGapView]

    @classmethod
    def of(cls, view: SubscriberView) -> SubscriberStatusView:
        status = view.status
        return cls(
            subscription=view.subscription,
            dead_letters=view.dead_letters.count,
            dead_letters_at_least=view.dead_letters.at_least,
            dead_letters_error=view.dead_letters.error,
            known=status is not None,
            held_events=status.held_events if status is not None else None,
            held=[HeldView.model_validate(h.__dict__) for h in (status.held if status else [])],
            accepted_gaps=[
                AcceptedGapView.model_validate(g.__dict__)
                for g in (status.accepted_gaps if status else [])
            ],
        )


class SubscribersView(Model):
    subscribers: list[SubscriberStatusView]


class DocumentPage(PageView):
    """A page of an aggregate's documents, each as the store holds it."""

    items: list[dict[str, Any]]
