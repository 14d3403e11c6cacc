"""The ports: what the outbox needs of the services it runs on, each as a sync and an async
abstract class (the adapters of `cosmos_outbox.cosmos`, `.servicebus` and `.blob` implement both,
on the Azure SDKs' sync and `aio` clients; the test kit's fakes implement the sync ones, which
the async API awaits as they are). The outbox's logic is written once over them.

- the container holding aggregates, their events, idempotency records and the quarantine, by
  role (Wolverine's habit: each user asks for the role it needs): `BatchStore`, the write side
  (one transactional batch in one partition, point reads); `DocumentWrites`, one document at a
  time (the relay's own records); `DocumentQueries`, the queries the operators and the releases
  need and the app's own (documents of a type, Cosmos DB SQL with parameters, in one partition
  or across them, whole or a page at a time); `DocumentStore`, all three, what an adapter of a
  container implements;
- `MessagePublisher` and its `MessageBatch`: the topic;
- `PayloadStore`: the claim check's bodies;
- `BacklogEstimator`: how far the relay's change-feed leases are behind;
- `ScheduleQueue`: where the relay schedules the release of a scheduled event for its due time
  (a Service Bus queue: the release comes back to the relay's `release_due_events` then).
- `DeadLetterQueues`: the dead-letter queues of the topic's subscriptions (and of queues an app
  names), peeked, and their messages moved out: sent again (or not), then removed.
- `TargetRules`: whether each subscription of the topic carries the targeted-delivery rule
  (`TargetRuleCheck`: the ones lacking it, or "not checked" and why), read through the
  management API.

A contract suite per port, and per role of the container (`cosmos_outbox_testing.contracts`),
holds every implementation to the same behaviour.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, NamedTuple, TypeVar

from cosmos_outbox._queries import QueryParameters, named_parameters
from cosmos_outbox._records import OutboxMessage, Release
from cosmos_outbox._subscription_rules import (
    CorrelationFilter,
    FalseFilter,
    Rule,
    RuleFilter,
    SqlFilter,
    TrueFilter,
    UnreadableFilter,
)

T = TypeVar("T")

__all__ = [
    "STAYS_SYNC",
    "AsyncBacklogEstimator",
    "AsyncBatchStore",
    "AsyncDeadLetterQueues",
    "AsyncDocumentQueries",
    "AsyncDocumentStore",
    "AsyncDocumentWrites",
    "AsyncMessagePublisher",
    "AsyncPayloadStore",
    "AsyncScheduleQueue",
    "AsyncTargetRules",
    "BacklogEstimator",
    "BatchOperation",
    "BatchStore",
    "CorrelationFilter",
    "DeadLetter",
    "DeadLetterEntity",
    "DeadLetterQueues",
    "DocumentQueries",
    "DocumentStore",
    "DocumentWrites",
    "FalseFilter",
    "LeaseBacklog",
    "MessageBatch",
    "MessagePublisher",
    "OutboxMessage",
    "Outgoing",
    "Page",
    "PayloadStore",
    "QueryParameters",
    "Release",
    "Rule",
    "RuleFilter",
    "ScheduleQueue",
    "SqlFilter",
    "SubscriptionLacking",
    "TargetRuleCheck",
    "TargetRules",
    "TrueFilter",
    "UnreadableFilter",
    "named_parameters",
    "stays_sync",
    "sync_methods",
]


F = TypeVar("F", bound=Callable[..., Any])
#: The attribute `stays_sync` sets on a port method.
STAYS_SYNC = "__outbox_stays_sync__"


def stays_sync(method: F) -> F:
    """Declares a port method that does no I/O and stays sync in the async port too (a batch
    filled in memory, a reference made from a name): `cosmos_outbox.testing.as_async` hands it
    on as it is rather than as a coroutine."""
    setattr(method, STAYS_SYNC, True)
    return method


def sync_methods() -> frozenset[str]:
    """The names of the port methods declared `stays_sync`, across the ports of this module."""
    return frozenset(
        name
        for port in (
            BatchStore,
            AsyncBatchStore,
            DocumentWrites,
            AsyncDocumentWrites,
            DocumentQueries,
            AsyncDocumentQueries,
            MessageBatch,
            MessagePublisher,
            AsyncMessagePublisher,
            PayloadStore,
            AsyncPayloadStore,
            BacklogEstimator,
            AsyncBacklogEstimator,
            ScheduleQueue,
            AsyncScheduleQueue,
            DeadLetterQueues,
            AsyncDeadLetterQueues,
        )
        for name, member in vars(port).items()
        if getattr(member, STAYS_SYNC, False)
    )


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing, and the store's token of the next page (None on the last)."""

    items: list[T]
    continuation_token: str | None


class BatchOperation(NamedTuple):
    """One operation of a transactional batch, in the batch's partition: `create`, `upsert`,
    `replace` (of `document`), `patch` (of the document `id`, with `patch` operations as Cosmos
    DB's: `add`, `set`, `replace`, `remove`, `incr`) or `delete` (of `id`). `if_match`: the
    etag the document must still have (replace, patch, delete). A named tuple: every write
    makes a few, and one is built in a quarter of a frozen dataclass's time."""

    kind: Literal["create", "upsert", "replace", "patch", "delete"]
    document: Mapping[str, Any] | None = None
    id: str = ""
    if_match: str | None = None
    patch: Sequence[Mapping[str, Any]] = ()

    @property
    def document_id(self) -> str:
        return str(self.document["id"]) if self.document is not None else self.id


class BatchStore(abc.ABC):
    """The write side of a container: one transactional batch in one partition, point reads,
    and whether it answers. All the write path needs (a transaction, a unit of work, an
    aggregate service, the Idempotency-Key's records, a stream's sequence), and all a store must
    do to run it. Its errors are `cosmos_outbox.errors`' (NotFoundError, AlreadyExistsError,
    PreconditionFailedError, ThrottledError, StoreUnavailableError, ...)."""

    @abc.abstractmethod
    def execute_batch(
        self, partition_key: str, operations: Sequence[BatchOperation]
    ) -> list[str | None]:
        """Run the operations as one transactional batch in one partition: all or nothing.
        The etag each operation left (None for a delete)."""

    @abc.abstractmethod
    def read(self, partition_key: str, document_id: str) -> dict[str, Any] | None:
        """A document (with its `_etag`), or None."""

    @abc.abstractmethod
    def ping(self) -> None:
        """The store answers and the container exists (TransientStoreError if not)."""


class DocumentWrites(abc.ABC):
    """One document at a time, outside a batch: what the relay keeps of its own (its status,
    the backlog's last hour, the quarantine) and a scheduled event's release."""

    @abc.abstractmethod
    def upsert(self, document: Mapping[str, Any]) -> dict[str, Any]:
        """Create or replace a document; what is stored."""

    @abc.abstractmethod
    def replace(
        self, document: Mapping[str, Any], *, if_match: str | None = None
    ) -> dict[str, Any]:
        """Replace an existing document (NotFoundError), conditioned on `if_match`."""

    @abc.abstractmethod
    def delete(self, partition_key: str, document_id: str) -> None:
        """Delete a document (NotFoundError when it is not there)."""


class DocumentQueries(abc.ABC):
    """The queries the operators and the releases need, and an app's own: a document by type
    and id whatever its partition, the documents of a type (whole or a page at a time), and
    Cosmos DB SQL with parameters."""

    @abc.abstractmethod
    def find(self, type_: str, document_id: str) -> dict[str, Any] | None:
        """The document of type `type_` with this id, whatever its partition, or None."""

    @abc.abstractmethod
    def of_type(self, type_: str, *, partition_key: str | None = None) -> list[dict[str, Any]]:
        """Every document of type `type_` (in one partition when given)."""

    @abc.abstractmethod
    def page_of_type(
        self, type_: str, *, page_size: int, continuation: str | None
    ) -> Page[dict[str, Any]]:
        """One page of the documents of type `type_`, and the token of the next.
        InvalidContinuationError for a token it did not issue."""

    @abc.abstractmethod
    def query(
        self, query: str, parameters: QueryParameters = None, *, partition_key: str | None = None
    ) -> list[Any]:
        """The results of a Cosmos DB SQL query (`SELECT ... FROM c WHERE c.x = @x ...`), every
        page of them: in one partition when `partition_key` is given, else across partitions.
        `parameters`: the SDK's `[{"name": "@x", "value": ...}]` or `{"@x": ...}`. A result is
        what the SELECT clause makes of a document: the document (`SELECT *`), an object of the
        projected fields, or a value (`SELECT VALUE`). InvalidQueryError for a query the store
        refuses."""

    @abc.abstractmethod
    def query_page(
        self,
        query: str,
        parameters: QueryParameters = None,
        *,
        partition_key: str | None = None,
        page_size: int,
        continuation: str | None = None,
    ) -> Page[Any]:
        """One page of a query's results (at most `page_size`; a page may hold fewer while
        more follow) and the token of the next page (None after the last). Pass the token
        back with the same query, parameters and partition key. InvalidContinuationError for a
        token it did not issue."""


class DocumentStore(BatchStore, DocumentWrites, DocumentQueries):
    """The container of an outbox, every role in one: what an adapter of a container implements
    (one partition key path: the outbox's documents keep their partition in `partitionKey`, and
    at the container's path when it is another; per-item TTL on). Its users ask for the role
    they need: the write path a `BatchStore`, the relay's records and the operators the whole
    container."""


class AsyncBatchStore(abc.ABC):
    """`BatchStore`, async."""

    @abc.abstractmethod
    async def execute_batch(
        self, partition_key: str, operations: Sequence[BatchOperation]
    ) -> list[str | None]: ...

    @abc.abstractmethod
    async def read(self, partition_key: str, document_id: str) -> dict[str, Any] | None: ...

    @abc.abstractmethod
    async def ping(self) -> None: ...


class AsyncDocumentWrites(abc.ABC):
    """`DocumentWrites`, async."""

    @abc.abstractmethod
    async def upsert(self, document: Mapping[str, Any]) -> dict[str, Any]: ...

    @abc.abstractmethod
    async def replace(
        self, document: Mapping[str, Any], *, if_match: str | None = None
    ) -> dict[str, Any]: ...

    @abc.abstractmethod
    async def delete(self, partition_key: str, document_id: str) -> None: ...


class AsyncDocumentQueries(abc.ABC):
    """`DocumentQueries`, async."""

    @abc.abstractmethod
    async def find(self, type_: str, document_id: str) -> dict[str, Any] | None: ...

    @abc.abstractmethod
    async def of_type(
        self, type_: str, *, partition_key: str | None = None
    ) -> list[dict[str, Any]]: ...

    @abc.abstractmethod
    async def page_of_type(
        self, type_: str, *, page_size: int, continuation: str | None
    ) -> Page[dict[str, Any]]: ...

    @abc.abstractmethod
    async def query(
        self, query: str, parameters: QueryParameters = None, *, partition_key: str | None = None
    ) -> list[Any]: ...

    @abc.abstractmethod
    async def query_page(
        self,
        query: str,
        parameters: QueryParameters = None,
        *,
        partition_key: str | None = None,
        page_size: int,
        continuation: str | None = None,
    ) -> Page[Any]: ...


class AsyncDocumentStore(AsyncBatchStore, AsyncDocumentWrites, AsyncDocumentQueries):
    """`DocumentStore`, async."""


class MessageBatch(abc.ABC):
    """A size-limited batch of messages (filled in memory: the same for sync and async)."""

    @abc.abstractmethod
    @stays_sync
    def try_add(self, message: OutboxMessage) -> bool:
        """Add the message if it fits; False when the batch is full."""

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @property
    @abc.abstractmethod
    def max_size_in_bytes(self) -> int:
        """The most a batch (and so one message) may hold: a message whose body alone is as
        large can never fit this link's batches."""


class MessagePublisher(abc.ABC):
    """Sends message batches to the topic. `send` either sends the whole batch or raises."""

    @abc.abstractmethod
    def create_batch(self) -> MessageBatch: ...

    @abc.abstractmethod
    def send(self, batch: MessageBatch) -> None: ...

    def refresh(self) -> bool:
        """Forget what was learnt of the entity (a link's message size limit), so the next
        batch reads it again: a message too large for an empty batch is re-checked once
        against a fresh link before it is offloaded or quarantined (the limit may have been
        raised). False when a fresh link could not take more (nothing was forgotten): the
        default, for publishers with nothing to learn."""
        return False

    def probe(self) -> None:
        """One round trip to the broker that changes nothing, raising when it fails (the
        operators' status asks when the relay does not move: does Service Bus answer?). The
        default makes a batch (no round trip once a link is open); an adapter opens a fresh
        link to the topic and closes it."""
        self.create_batch()


class AsyncMessagePublisher(abc.ABC):
    """`MessagePublisher`, async."""

    @abc.abstractmethod
    async def create_batch(self) -> MessageBatch: ...

    @abc.abstractmethod
    async def send(self, batch: MessageBatch) -> None: ...

    async def refresh(self) -> bool:
        return False

    async def probe(self) -> None:
        """`MessagePublisher.probe`, async."""
        await self.create_batch()


class PayloadStore(abc.ABC):
    """Keeps event bodies too large for a message: the claim check. The relay, after the commit,
    stores a body under a name derived from its event (aggregate type / aggregate id / event
    id) and sends a message that refers to it (CloudEvents `dataref`); subscribers fetch it by
    that reference. A retry stores the same bytes under the same name.

    Errors: `PayloadStoreError` (the store failed: retry), `PayloadNotFoundError` (nothing
    there), `PayloadReferenceError` (not one of this store's references: never fetched)."""

    @abc.abstractmethod
    @stays_sync
    def reference(self, name: str) -> str:
        """The reference (a URL) of what is stored under `name`: known before it is stored,
        the same for every retry (no I/O)."""

    @abc.abstractmethod
    def put(self, name: str, body: bytes, *, content_type: str) -> None:
        """Store `body` under `name`, replacing what is there (a retry writes the same bytes)."""

    @abc.abstractmethod
    def get(self, reference: str) -> bytes:
        """The body a reference of this store names."""

    def check(self) -> None:
        """Raise `PayloadStoreError` saying what is missing (the container) and how to fix it
        when bodies cannot be stored here; the relay asks before it first relays. Nothing to
        check by default."""
        return


class AsyncPayloadStore(abc.ABC):
    """`PayloadStore`, async (`reference` does no I/O: it stays sync)."""

    @abc.abstractmethod
    @stays_sync
    def reference(self, name: str) -> str: ...

    @abc.abstractmethod
    async def put(self, name: str, body: bytes, *, content_type: str) -> None: ...

    @abc.abstractmethod
    async def get(self, reference: str) -> bytes: ...

    async def check(self) -> None:
        """`PayloadStore.check`."""
        return


@dataclass(frozen=True)
class LeaseBacklog:
    """One lease: the estimated number of changes after its checkpoint, and when the first of
    them was written (epoch seconds; None when nothing is pending)."""

    lease: str
    pending: int
    oldest_created_at: float | None
    #: the instance holding the lease, and when it last wrote it (ISO 8601), when known
    owner: str | None = None
    checkpoint_at: str | None = None
    #: the ids of the event documents read after its continuation (not relayed yet), and
    #: whether that is all of them (the estimate read to the end of the feed); () and False
    #: when an estimator does not say
    pending_ids: tuple[str, ...] = ()
    pending_ids_complete: bool = False


class BacklogEstimator(abc.ABC):
    """Estimates the change-feed backlog of the relay's leases the way the Cosmos DB change feed
    estimator does: from each lease's continuation, the position and creation time of the
    first unprocessed change, and the latest position of the range. Reads no more than that."""

    @abc.abstractmethod
    def estimate(self) -> list[LeaseBacklog]: ...


class AsyncBacklogEstimator(abc.ABC):
    """`BacklogEstimator`, async."""

    @abc.abstractmethod
    async def estimate(self) -> list[LeaseBacklog]: ...


class ScheduleQueue(abc.ABC):
    """Where the relay schedules the release of each scheduled event for its due time: the
    release is handed back then (on Azure: a Service Bus queue, the message scheduled for
    `Release.at`, received by the relay's `release_due_events` function), never earlier, and
    at least once (a release handed back twice is harmless: the second finds the event
    released). `schedule` either takes every release or raises."""

    @abc.abstractmethod
    def schedule(self, releases: Sequence[Release]) -> None:
        """Schedule each release for its time (a time past: at once)."""

    def check(self) -> None:
        """Raise, saying what is missing (the queue) and how to fix it, when releases cannot be
        scheduled here; the relay asks before it first relays. Nothing to check by default."""
        return


class AsyncScheduleQueue(abc.ABC):
    """`ScheduleQueue`, async."""

    @abc.abstractmethod
    async def schedule(self, releases: Sequence[Release]) -> None: ...

    async def check(self) -> None:
        """`ScheduleQueue.check`."""
        return


DeadLetterKind = Literal["subscription", "queue"]


@dataclass(frozen=True)
class DeadLetterEntity:
    """An entity whose dead-letter queue the operators watch: a subscription of the outbox's
    topic (its dead letters are sent again to the topic) or a queue (sent again to it)."""

    name: str
    kind: DeadLetterKind = "subscription"


@dataclass(frozen=True)
class DeadLetter:
    """One message of a dead-letter queue, as peeked: what it was sent with (its properties
    without the two the broker added), why it was dead-lettered, how often it was delivered,
    when it was enqueued (epoch seconds). `sequence_number` is its number in the dead-letter
    queue: what an operator names it by."""

    sequence_number: int
    body: bytes
    message_id: str | None
    session_id: str | None
    subject: str | None
    content_type: str | None
    correlation_id: str | None
    application_properties: Mapping[str, Any]
    reason: str | None
    description: str | None
    delivery_count: int
    enqueued_at: float | None


@dataclass(frozen=True)
class Outgoing:
    """A message sent as it is (nothing added): a dead letter's resubmission, or a notice."""

    body: bytes
    message_id: str
    session_id: str | None
    subject: str | None
    content_type: str | None
    application_properties: Mapping[str, Any]
    correlation_id: str | None = None


#: What `move` did with one dead letter: None, done (sent when there was something to send,
#: then removed); else why not.
MoveOutcome = str | None


class DeadLetterQueues(abc.ABC):
    """The dead-letter queues of entities (`DeadLetterEntity`): peek (needs Listen, as reading
    any message does; no Manage right), and move a dead letter out: its message sent (to the
    topic for a subscription's, to the queue for a queue's), and only once the send was
    accepted, the dead letter removed. A crash between the two leaves it where it was (a
    duplicate later, never a loss)."""

    @abc.abstractmethod
    def peek(
        self, entity: DeadLetterEntity, *, from_sequence: int, max_count: int
    ) -> list[DeadLetter]:
        """Up to `max_count` dead letters from sequence number `from_sequence` on, in order;
        fewer (or none) at the end."""

    @abc.abstractmethod
    def move(
        self, entity: DeadLetterEntity, moves: Mapping[int, Outgoing | None]
    ) -> dict[int, MoveOutcome]:
        """For each dead letter named by its sequence number: its `Outgoing` sent (None: nothing
        sent), then the dead letter removed. The outcome per sequence number: None when done;
        else why not (not found: gone, or locked by another receiver; the send refused: the
        dead letter stays)."""

    @abc.abstractmethod
    def send(self, entity: DeadLetterEntity, messages: Sequence[Outgoing]) -> None:
        """Send `messages` where `entity`'s dead letters go back (the topic for a
        subscription's, the queue for a queue's), as a move sends them, with no dead letter to
        remove: a failure kept as a record (`cosmos_outbox.operations._failures`) retried. Raises
        when the broker refuses (nothing said sent)."""


class AsyncDeadLetterQueues(abc.ABC):
    """`DeadLetterQueues`, async."""

    @abc.abstractmethod
    async def peek(
        self, entity: DeadLetterEntity, *, from_sequence: int, max_count: int
    ) -> list[DeadLetter]: ...

    @abc.abstractmethod
    async def move(
        self, entity: DeadLetterEntity, moves: Mapping[int, Outgoing | None]
    ) -> dict[int, MoveOutcome]: ...

    @abc.abstractmethod
    async def send(self, entity: DeadLetterEntity, messages: Sequence[Outgoing]) -> None: ...


#: The command that gives the subscriptions holding only `$Default` the rule (named in the
#: check's sentence).
TARGET_RULES_COMMAND = "cosmos-outbox target-rules --yes"


@dataclass(frozen=True)
class SubscriptionLacking:
    """A subscription one of whose rules lets another subscription's targeted message in."""

    subscription: str
    #: the rules that let them in, each with its filter (`$Default: TrueFilter`)
    rules: tuple[str, ...]
    #: only Azure's `$Default` lets them in: the command replaces it with the rule
    fixable: bool
    #: the rule names it has (to know whether `outbox-target` exists already)
    names: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"{self.subscription} (rule {', '.join(self.rules)})"


@dataclass(frozen=True)
class TargetRuleCheck:
    """What the targeted-delivery rule check found: `checked` False with `reason` when it could
    not look; else the topic's subscriptions and those lacking the rule."""

    topic: str
    checked: bool
    subscriptions: tuple[str, ...] = ()
    lacking: tuple[SubscriptionLacking, ...] = ()
    reason: str = ""
    #: each subscription's rules as read (what it receives: `cosmos_outbox.operations`' previews
    #: evaluate them as Service Bus does)
    rules: Mapping[str, tuple[Rule, ...]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.checked and not self.lacking

    def describe(self) -> str:
        """One line: what an operator reads in the log and the status."""
        if not self.checked:
            return f"targeted-delivery rules of topic {self.topic!r} not checked: {self.reason}"
        if not self.lacking:
            return (
                f"targeted-delivery rules: each of the {len(self.subscriptions)} subscription(s) "
                f"of topic {self.topic!r} carries one"
            )
        return (
            f"targeted-delivery rules: {len(self.lacking)} subscription(s) of topic "
            f"{self.topic!r} lack one and receive what is meant for another subscription (a "
            "dead letter's resubmission, a targeted re-drive, a released version's notice): "
            f"{'; '.join(s.describe() for s in self.lacking)}; `{TARGET_RULES_COMMAND}` adds it "
            "(docs/upgrading.md, step 6)"
        )


class TargetRules(abc.ABC):
    """The topic's subscriptions and whether each carries the targeted-delivery rule
    (`NOT EXISTS(outboxTarget) OR outboxTarget = '<subscription>'`, alone or AND-ed to a filter
    of its own), read through the management API (Manage rights). Never raises: a management
    API that does not answer or refuses is a check `not checked`, with why."""

    @abc.abstractmethod
    def check(self) -> TargetRuleCheck:
        """Read the topic's subscriptions and their rules now; what was found."""


class AsyncTargetRules(abc.ABC):
    """`TargetRules`, async."""

    @abc.abstractmethod
    async def check(self) -> TargetRuleCheck: ...
