"""What the contract suites run against (a world: a store, sync or async, and what a test needs
besides it), the aggregates they drive (`AggregateExample`), and the in-memory worlds."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import inspect
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

import pytest

from cosmos_outbox import Transaction, aio
from cosmos_outbox.aggregates import (
    Aggregate,
    AggregateService,
    Answer,
    IdempotencyKey,
    Recorded,
    UnitOfWork,
    Versioned,
)
from cosmos_outbox.bridge import as_async, run_sync
from cosmos_outbox.documents import EVENT_TYPE, envelope_and_data
from cosmos_outbox.operations import stored_events
from cosmos_outbox.ports import (
    AsyncBacklogEstimator,
    AsyncBatchStore,
    AsyncDocumentStore,
    AsyncMessagePublisher,
    AsyncPayloadStore,
    BacklogEstimator,
    BatchOperation,
    DocumentStore,
    MessagePublisher,
    OutboxMessage,
    Outgoing,
    PayloadStore,
)
from cosmos_outbox.relay import Quarantine
from cosmos_outbox.services import Services
from cosmos_outbox.settings import DEFAULT_EVENT_TTL_SECONDS, DEFAULT_IDEMPOTENCY_TTL_SECONDS
from cosmos_outbox_testing._fakes import (
    FakePublisher,
    InMemoryBacklogEstimator,
    InMemoryPayloadStore,
    InMemoryStore,
)

A = TypeVar("A", bound="Aggregate")
T = TypeVar("T")
C = TypeVar("C", bound="_Closable")
W = TypeVar("W")


@dataclass(frozen=True)
class AggregateExample:
    """One aggregate type as the contracts drive it: `new()` makes a fresh aggregate that
    recorded one creation event; `change(aggregate)` makes one change of a fresh aggregate that
    raises one event; `actions` are the creation event's action and the change's."""

    name: str
    new: Callable[[], Aggregate]
    change: Callable[[Any], object]
    actions: tuple[str, str]

    def type(self) -> type[Aggregate]:
        return type(self.new())


def examples(*driven: AggregateExample) -> Any:
    """The `example` fixture of a contract subclass: each test runs once per example."""

    @pytest.fixture(params=driven, ids=[k.name for k in driven])
    def example(self: object, request: pytest.FixtureRequest) -> AggregateExample:
        return request.param  # type: ignore[no-any-return]

    return example


class Suite(Generic[W]):
    """A contract suite: it runs against a `world` fixture (what its port's implementation is
    and what a test needs besides it; `StoreWorld` for the store's suites)."""

    @pytest.fixture
    @abc.abstractmethod
    def world(self) -> W: ...


class AggregateSuite(Suite["StoreWorld"]):
    """A suite driving aggregates over the store: a `world` and an `example` (the aggregates it
    drives, `examples(...)`)."""

    @pytest.fixture
    @abc.abstractmethod
    def example(self) -> AggregateExample: ...


class _Runs:
    """A world whose port may be async: `run` drives one of its coroutines to its end (here, or
    on a world's `EventLoop`)."""

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run one coroutine of this world's to its end."""
        return run_sync(coroutine)


def finished(world: _Runs | StoreWorld, value: Any) -> Any:
    """What a port's call answered, run to its end by `world` when it is a coroutine (an async
    port's; a sync one's answer as it is)."""
    return world.run(value) if inspect.iscoroutine(value) else value


def unique(prefix: str) -> str:
    """A name of one test's own (a partition, a session, a type): a world may share its
    container or topic with other tests and runs."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def plain(document: dict[str, Any]) -> dict[str, Any]:
    """A document without the store's system properties (`_etag`, `_rid`, `_ts`, ...)."""
    return {k: v for k, v in document.items() if not k.startswith("_")}


@contextlib.contextmanager
def _set(target: object, name: str, value: object) -> Iterator[None]:
    """`target.<name>` is `value` inside the block, and what it was after it."""
    before = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, before)


class _Blocking:
    """An object of the async API seen through `run`: each method call runs to its end."""

    def __init__(self, target: object, run: Callable[[Coroutine[Any, Any, Any]], Any]) -> None:
        self._target, self._run = target, run

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._target, name)
        return lambda *args, **kwargs: self._run(method(*args, **kwargs))


class StoreWorld(_Runs, abc.ABC):
    """What the store's suites need: the document store (sync, or async: then `run` drives
    coroutines on an event loop, `EventLoop`), a way to read a partition's documents and to let
    one expire. The transaction, the unit of work, the service and the quarantine the suites use
    are the outbox's own, over this store, as the sync API runs them (`run`); the write path
    (transactions, units of work, services) sees the store through its role alone, the write
    side (`AsyncBatchStore`: `WriteSide`), so a write path that reached for another of the
    store's methods fails its suite."""

    store: DocumentStore | AsyncDocumentStore
    #: its coroutines run on an event loop (`run` hands them to it: an `EventLoop`)
    asynchronous: bool = False
    event_ttl_seconds: int = DEFAULT_EVENT_TTL_SECONDS
    idempotency_ttl_seconds: int = DEFAULT_IDEMPOTENCY_TTL_SECONDS

    def gate(self, parties: int) -> Gate:
        """Where `parties` racing calls of the outbox's callables meet (see `Gate`)."""
        return Gate(parties, asynchronous=self.asynchronous)

    @property
    def async_store(self) -> AsyncDocumentStore:
        return as_async(self.store)

    def outbox(self, process: object = None, *, kind: type[Aggregate] | None = None) -> aio.Outbox:
        """The async outbox of one `process` over the write side of this store, with the world's
        TTLs (outboxes of one process share what it knows of their transactions' sequences;
        another process, another `process`); `kind`: an aggregate it serves."""
        known = self.__dict__.setdefault("_outboxes", {})
        key = (process, kind)
        if key not in known:
            services = Services(
                # the write path's services: the store's write side, nothing to relay to
                store=cast(AsyncDocumentStore, WriteSide(self.async_store)),
                publisher=_no_publisher,
                token_secret="contract",  # noqa: S106 (no token is sealed here)
                event_ttl_seconds=self.event_ttl_seconds,
                idempotency_ttl_seconds=self.idempotency_ttl_seconds,
            )
            known[key] = aio.Outbox([kind] if kind else [], services=lambda: services)
        outbox: aio.Outbox = known[key]
        return outbox

    def uow(self) -> UnitOfWork:
        return UnitOfWork(self.outbox().unit_of_work(), run=self.run)

    def service(self, kind: type[A]) -> AggregateService[A]:
        return AggregateService(self.outbox(kind=kind).service(kind), run=self.run)

    def transaction(
        self,
        partition_key: str,
        *,
        entity: str = "customer",
        process: object = None,
        **options: Any,
    ) -> Transaction:
        """A transaction on this store, run to its end by `run`; transactions of one
        `process` share what it knows of their sequences (another process, another
        `process`)."""
        return Transaction(
            self.outbox(process).transaction(partition_key, entity=entity, **options),
            run=self.run,
        )

    @property
    def quarantine(self) -> Any:
        """The quarantine over this store (its methods run to their end)."""
        return _Blocking(Quarantine(self.async_store), self.run)

    def events_since(self, *args: Any, **kwargs: Any) -> Any:
        """The stored events a re-drive reads (`cosmos_outbox.operations.stored_events`)."""
        return self.run(stored_events(self.async_store, *args, **kwargs))

    def plant(self, document: dict[str, Any]) -> None:
        """Write a raw document behind the unit of work's back (to inject a real failure), in
        its partition (`partitionKey`), through the write side."""
        operation = BatchOperation("upsert", document)
        self.run(self.async_store.execute_batch(str(document["partitionKey"]), [operation]))

    @abc.abstractmethod
    def documents(self, partition_key: str) -> list[dict[str, Any]]:
        """Every document stored in one partition."""

    @abc.abstractmethod
    def expire(self, partition_key: str, document_id: str) -> None:
        """Let the store's TTL delete one document now (shorten it, or move the store's time
        on, and wait until the document is gone)."""


def _no_publisher() -> MessagePublisher:
    raise NotImplementedError("the write path's suites relay nothing")


class WriteSide(AsyncBatchStore):
    """A store seen through the write side's role alone (`AsyncBatchStore`: a batch, a point
    read, a ping): what the write path's suites run the outbox over, so that the write path
    reaching for any other method of the store (an upsert, a query) fails them."""

    def __init__(self, store: AsyncBatchStore) -> None:
        self._store = store

    async def execute_batch(
        self, partition_key: str, operations: Sequence[BatchOperation]
    ) -> list[str | None]:
        return await self._store.execute_batch(partition_key, operations)

    async def read(self, partition_key: str, document_id: str) -> dict[str, Any] | None:
        return await self._store.read(partition_key, document_id)

    async def ping(self) -> None:
        await self._store.ping()


class Gate:
    """Racers meet here before going on: `meet(value)`, called by a callable the outbox runs
    (a `build`, a change), gives `value` back once `parties` racers reached it: it blocks the
    racer's thread in a sync world, and is awaited on the loop in an async one (where a
    blocking wait would stop every racer)."""

    def __init__(self, parties: int, *, asynchronous: bool) -> None:
        self.parties, self.asynchronous = parties, asynchronous
        self._threads = threading.Barrier(parties, timeout=30)
        self._arrived = 0
        self._lock = threading.Lock()
        self._open: asyncio.Event | None = None

    def meet(self, value: T) -> Any:
        if not self.asynchronous:
            self._threads.wait()
            return value

        async def meeting() -> T:
            with self._lock:
                if self._open is None:
                    self._open = asyncio.Event()
                self._arrived += 1
                if self._arrived >= self.parties:
                    self._open.set()
                event = self._open
            await asyncio.wait_for(event.wait(), 30)
            return value

        return meeting()


class _Closable(Protocol):
    def close(self) -> Coroutine[Any, Any, Any]: ...


class EventLoop:
    """An event loop on a thread of its own, for a world of async adapters: `run` hands a
    coroutine to it and waits (from any thread: racing tests interleave on the loop)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="contract-loop", daemon=True
        )
        self._thread.start()
        self._closing: list[_Closable] = []

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(120)

    def closing(self, client: C) -> C:
        """`client` (an `aio` SDK client: an async `close()`), closed on this loop when the
        loop is closed: its connections end with it, none is left open at exit."""
        self._closing.append(client)
        return client

    def close(self) -> None:
        while self._closing:
            with contextlib.suppress(Exception):
                self.run(self._closing.pop().close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


class InMemoryStoreWorld(StoreWorld):
    """The in-memory store (`InMemoryStore`)."""

    def __init__(self) -> None:
        self.memory = InMemoryStore()
        self.store = self.memory

    def documents(self, partition_key: str) -> list[dict[str, Any]]:
        return self.memory.in_partition(partition_key)

    def expire(self, partition_key: str, document_id: str) -> None:
        self.memory.outlive(partition_key, document_id)


class PayloadWorld(_Runs, abc.ABC):
    """What the payload store contract runs against: the store (sync or async), a reference of
    another store (or container) of the same kind, and a way to take the store down."""

    store: PayloadStore | AsyncPayloadStore
    #: a well-formed reference this store does not hold (another container or account)
    foreign_reference: str

    @property
    def payloads(self) -> PayloadStore:
        """The store, its calls run to their end (a sync store's as they are)."""
        if isinstance(self.store, PayloadStore):
            return self.store
        return cast(PayloadStore, _BlockingPayloads(self.store, self.run))

    @abc.abstractmethod
    def outage(self) -> contextlib.AbstractContextManager[None]:
        """The store is unreachable inside the block, and back after it."""


class _BlockingPayloads(_Blocking):
    def __getattr__(self, name: str) -> Any:
        if name == "reference":
            return getattr(self._target, name)
        return super().__getattr__(name)


class InMemoryPayloadWorld(PayloadWorld):
    """The in-memory payload store; its foreign reference is another in-memory store's."""

    def __init__(self) -> None:
        self.store = self.memory = InMemoryPayloadStore()
        self.foreign_reference = InMemoryPayloadStore().reference("kind/id/event")

    def outage(self) -> contextlib.AbstractContextManager[None]:
        return _set(self.memory, "unavailable", True)


class BacklogWorld(abc.ABC):
    """What the backlog estimator's suite needs: a store world (the container the relay reads;
    the suite writes to it through the store world's transactions), the estimator over it
    (sync, or async: the store world's `run` awaits it), and a way to checkpoint the relay's
    leases at the latest change, as the trigger does after an invocation."""

    store_world: StoreWorld
    estimator: BacklogEstimator | AsyncBacklogEstimator

    @abc.abstractmethod
    def checkpoint(self) -> None:
        """Every lease of the relay checkpointed after the latest change (a lease written
        when there is none yet, as the trigger's first run writes it)."""


class InMemoryBacklogWorld(BacklogWorld):
    """The in-memory store and its estimator (`InMemoryBacklogEstimator`); `store_world` may
    drive it through the async API (`asynchronous`, on `loop`)."""

    def __init__(
        self, store_world: InMemoryStoreWorld | None = None, *, asynchronous: bool = False
    ) -> None:
        self.store_world = store_world or InMemoryStoreWorld()
        memory = self.store_world.memory
        self.fake = InMemoryBacklogEstimator(memory)
        self.estimator = as_async(self.fake) if asynchronous else self.fake

    def checkpoint(self) -> None:
        self.fake.checkpoint()


@dataclass(frozen=True)
class Received:
    """A message as it reached the topic (read back by a `PublisherWorld`)."""

    message_id: str
    session_id: str | None
    subject: str | None
    body: bytes
    properties: dict[str, Any]


def received(
    messages: Iterable[OutboxMessage | Outgoing], sessions: list[str], count: int
) -> list[Received]:
    """The messages of `sessions` among what a fake sent, as a world reads them back: `count` at
    least (else the test fails, saying how many)."""
    found = [
        Received(m.message_id, m.session_id, m.subject, m.body, dict(m.application_properties))
        for m in messages
        if m.session_id in sessions
    ]
    assert len(found) >= count, f"{len(found)} of {count} messages sent"
    return found


class PublisherWorld(_Runs, abc.ABC):
    """What the publisher's suite needs: the publisher (sync, or async: `run` awaits its
    coroutines), what reached its topic, and a way to make sends fail."""

    publisher: MessagePublisher | AsyncMessagePublisher

    @abc.abstractmethod
    def received(self, sessions: list[str], count: int) -> list[Received]:
        """The messages of `sessions` that reached the topic, in the order each session's
        arrived: waits until `count` are there (fails past a deadline)."""

    @abc.abstractmethod
    def outage(self) -> contextlib.AbstractContextManager[None]:
        """Sends fail inside the block (the broker is unreachable), and work again after it."""


class FakePublisherWorld(PublisherWorld):
    """The test kit's `FakePublisher` (through the async API when `asynchronous`)."""

    def __init__(self, *, asynchronous: bool = False, max_batch_bytes: int = 8192) -> None:
        self.fake = FakePublisher(max_batch_bytes=max_batch_bytes)
        self.publisher = as_async(self.fake) if asynchronous else self.fake

    def received(self, sessions: list[str], count: int) -> list[Received]:
        return received(self.fake.messages, sessions, count)

    def outage(self) -> contextlib.AbstractContextManager[None]:
        return _set(self.fake, "fail_on_send", self.fake.attempts + 1)


def saved(world: StoreWorld, aggregate: Aggregate) -> Any:
    """`aggregate`, committed with its events."""
    with world.uow() as uow:
        uow.repository(type(aggregate)).add(aggregate)
        uow.commit()
    return aggregate


def key_of(
    key: str, *, request: str = "the same request", status: int = 200
) -> IdempotencyKey[Any]:
    """An Idempotency-Key `key` of a request, answering with the aggregate's id and version."""
    return IdempotencyKey(
        scope="POST contract",
        value=key,
        fingerprint=request,
        answer=lambda a: Answer(status, {"id": a.id, "version": a.version}, f"/contract/{a.id}"),
    )


def answered(key: IdempotencyKey[Any], result: Versioned[Any] | Recorded) -> tuple[Answer, str]:
    """What the route helper answers from a write's result: the answer and the ETag."""
    if isinstance(result, Recorded):
        return result.answer, result.etag
    return key.answer_for(result.aggregate), result.etag


def types_in(world: StoreWorld, partition_key: str) -> list[str]:
    return sorted(d["type"] for d in world.documents(partition_key))


def events_of(world: StoreWorld, partition_key: str) -> list[dict[str, Any]]:
    return sorted(
        (envelope_and_data(d) for d in world.documents(partition_key) if d["type"] == EVENT_TYPE),
        key=lambda e: e["version"],
    )
