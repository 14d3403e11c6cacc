"""What the integration modules share besides the stack itself (conftest.py: `funcstack_config`,
`fresh`, `loop`): the resources of fixtures/funcstack.json by name, the Cosmos DB worlds of the
contract suites (sync and `aio`), the tickets' stored events, the relay over a publisher, and
a receiver of the test topic's sessions. No funcstack import here: conftest.py imports this
module, and the package's tests run without funcstack (its integration modules are skipped)."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest
from azure.cosmos import ContainerProxy, CosmosClient
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient
from azure.servicebus import ServiceBusClient, ServiceBusReceivedMessage
from deadlines import SHORT, scaled, wait_for
from tickets import Ticket

from cosmos_outbox._mapper import event_documents, read_feed
from cosmos_outbox._quarantine import Quarantine
from cosmos_outbox._relay.forwarding import Relay, RelayReport
from cosmos_outbox._sync_over_async import run_sync
from cosmos_outbox.cosmos import CosmosDocumentStore
from cosmos_outbox.cosmos.aio import CosmosDocumentStore as AsyncCosmosDocumentStore
from cosmos_outbox.telemetry import RelayTelemetry
from cosmos_outbox_testing import InMemoryStore
from cosmos_outbox_testing.contracts import TARGET_RULES_LAYOUT, EventLoop, StoreWorld

if TYPE_CHECKING:
    from funcstack_external import ExternalServices

    from funcstack import LocalStack

#: fixtures/funcstack.json: the database and the outbox's container, the lease container, the
#: topic and its session subscription, the claim check's blob container.
DATABASE, CONTAINER, LEASES = "outbox-tests", "outbox", "leases"
TOPIC, SUBSCRIPTION = "outbox-events", "all"
PAYLOADS = "outbox-payloads"
#: How long a test listens for messages that must not come (`received(..., 0, NOTHING_MORE)`): a
#: check of a non-event, longer on a slower machine (TEST_DEADLINE_SCALE).
NOTHING_MORE = scaled(3.0)
#: The longest a session receiver is held: the subscription's session lock is a minute, and the
#: sync SDK does not renew it; past this the session is taken again (its messages completed).
SESSION_TURN = 30.0
#: The relay's telemetry (the global providers: a no-op unless a test installs an SDK).
TELEMETRY = RelayTelemetry(destination=TOPIC)


# -- the target-rules module's topics ---------------------------------------------------------


def clause(name: str) -> str:
    """The targeted-delivery clause a subscription named `name` needs."""
    return f"NOT EXISTS(outboxTarget) OR outboxTarget = '{name}'"


def sql(name: str, expression: str) -> dict[str, Any]:
    """A SQL rule as a Service Bus Config.json declares it."""
    return {
        "Name": name,
        "Properties": {"FilterType": "Sql", "SqlFilter": {"SqlExpression": expression}},
    }


def rules_topic(name: str, *, own_filter: bool = False) -> dict[str, Any]:
    """A topic of relay/test_target_rules.py: one subscription with the rule, two without."""
    subscriptions: list[dict[str, Any]] = [
        {"Name": "fine", "Rules": [sql("outbox-target", clause("fine"))]},
        {"Name": "plain"},  # created without a rule: Azure's $Default, every message
        {"Name": "legacy"},
    ]
    if own_filter:
        subscriptions.append({"Name": "kinds", "Rules": [sql("kinds", "kind = 'a'")]})
    return {"Name": name, "Properties": {}, "Subscriptions": subscriptions}


def contract_topic() -> dict[str, Any]:
    """The target-rules contract suite's topic, as `TARGET_RULES_LAYOUT` lays it out."""
    subscriptions: list[dict[str, Any]] = []
    for name, rules in TARGET_RULES_LAYOUT.items():
        declared: dict[str, Any] = {"Name": name}
        if rules is not None:
            declared["Rules"] = [sql(rule, expression) for rule, expression in rules]
        subscriptions.append(declared)
    return {"Name": "contract", "Properties": {}, "Subscriptions": subscriptions}


#: relay/test_target_rules.py's topics on the session's namespace (conftest.py's
#: `funcstack_config` adds them to fixtures/funcstack.json's), one per test, since the command
#: changes their rules; TOPIC's subscriptions carry the rule everywhere.
TARGET_RULES_TOPICS = (
    rules_topic("at-start"),
    rules_topic("upgraded", own_filter=True),
    contract_topic(),
)


# -- the stack of another interpreter ----------------------------------------------------------


class ExternalStack:
    """The services of a funcstack run by a Python 3.13 environment (conftest.py), with the
    attributes of funcstack's `LocalStack` the adapter suites use: its connection strings and
    `container_client`. What needs funcstack in-process (stopping a service, hosting an app)
    is not here: the tests that do it skip."""

    def __init__(self, services: ExternalServices) -> None:
        self.cosmos_connection_string = services.cosmos_connection_string
        self.servicebus_connection_string = services.servicebus_connection_string
        self.storage_connection_string = services.storage_connection_string
        self.cosmos_client_options = services.cosmos_client_options

    @property
    def cosmos_endpoint(self) -> str:
        """The Cosmos DB endpoint's URL (`AccountEndpoint` of its connection string), as
        `LocalStack.cosmos_endpoint` gives it."""
        for part in self.cosmos_connection_string.split(";"):
            key, _, value = part.partition("=")
            if key.strip().lower() == "accountendpoint":
                return value.strip()
        raise ValueError("the Cosmos DB connection string names no AccountEndpoint")

    def container_client(self, database: str, container: str) -> ContainerProxy:
        """A container on the stack's Cosmos DB endpoint, through the SDK (its certificate
        verified, as funcstack's `LocalStack` does)."""
        client = CosmosClient.from_connection_string(
            self.cosmos_connection_string, **self.cosmos_client_options()
        )
        return client.get_database_client(database).get_container_client(container)


def verified(stack: LocalStack | ExternalStack) -> dict[str, Any]:
    """The keyword arguments that make an SDK client of this process verify the stack's Cosmos
    DB endpoint (its certificate is funcstack's local authority's; this process's trust store
    does not hold it, a host's does)."""
    if isinstance(stack, ExternalStack):
        return stack.cosmos_client_options()
    assert stack.cosmos is not None
    return stack.cosmos.client_options()


# -- Cosmos DB ---------------------------------------------------------------------------------


class CosmosWorld(StoreWorld):
    """A container through the SDK's sync client (event documents kept `ttl` seconds)."""

    def __init__(self, container: ContainerProxy, *, ttl: int | None = None) -> None:
        self.container = container
        self.store = CosmosDocumentStore(container)
        if ttl is not None:
            self.event_ttl_seconds = ttl

    def documents(self, partition_key: str) -> list[dict[str, Any]]:
        return list(self.container.query_items("SELECT * FROM c", partition_key=partition_key))

    def expire(self, partition_key: str, document_id: str) -> None:
        """The store's own TTL, shortened to 1 s: wait until it has deleted the document."""
        document = self.container.read_item(document_id, partition_key=partition_key)
        self.container.replace_item(
            document_id, {k: v for k, v in document.items() if not k.startswith("_")} | {"ttl": 1}
        )
        wait_for(
            lambda: not any(d["id"] == document_id for d in self.documents(partition_key)),
            f"{document_id} deleted by the store's TTL",
            every=0.25,
        )


class AsyncCosmosWorld(CosmosWorld):
    """The same container through the SDK's `aio` client, on an event loop of its own (the
    sync client only arranges and inspects)."""

    asynchronous = True

    def __init__(
        self,
        container: ContainerProxy,
        stack: LocalStack,
        loop: EventLoop,
        *,
        ttl: int | None = None,
    ) -> None:
        super().__init__(container, ttl=ttl)
        self.loop = loop
        name = container.id

        async def connect() -> AsyncCosmosDocumentStore:
            client = loop.closing(
                AsyncCosmosClient.from_connection_string(
                    stack.cosmos_connection_string, **verified(stack)
                )
            )
            return AsyncCosmosDocumentStore(
                client.get_database_client(DATABASE).get_container_client(name)
            )

        self.store = loop.run(connect())

    def run(self, coroutine: Any) -> Any:
        return self.loop.run(coroutine)


def cosmos_world(
    flavour: str,
    container: ContainerProxy,
    stack: LocalStack,
    loop: EventLoop,
    *,
    ttl: int | None = None,
) -> CosmosWorld:
    """The world of a `sync` or `aio` test on `container`."""
    if flavour == "sync":
        return CosmosWorld(container, ttl=ttl)
    return AsyncCosmosWorld(container, stack, loop, ttl=ttl)


class OnCosmos:
    """The contract suites' world: the `fresh` container through the sync client, then through
    the aio one (a module overrides `fresh` for a container of another kind)."""

    @pytest.fixture(params=["sync", "aio"])
    def world(
        self,
        request: pytest.FixtureRequest,
        fresh: str,
        funcstack_services: LocalStack,
        loop: EventLoop,
    ) -> StoreWorld:
        return cosmos_world(
            request.param,
            funcstack_services.container_client(DATABASE, fresh),
            funcstack_services,
            loop,
        )


# -- the relay ---------------------------------------------------------------------------------


def history(tickets: int, changes: int, title_size: int = 40) -> list[dict[str, Any]]:
    """The stored events of `tickets` tickets, each opened then retitled `changes` times, their
    titles `title_size` characters long (as stored: events of larger tickets than the app's)."""
    documents = []
    for _ in range(tickets):
        ticket = Ticket.open("Printer on fire")
        for n in range(changes):
            ticket.retitle(f"Retitled {n}")
        documents += event_documents(ticket, ttl_seconds=600)
    for document in documents:
        retitle(document, "t" * title_size)
    return documents


def retitle(document: dict[str, Any], title: str) -> None:
    """A stored ticket event with another title in its body (the event document keeps the body
    as JSON text)."""
    document["body"] = json.dumps(
        {**json.loads(document["body"]), "title": title}, separators=(",", ":")
    )


def relay_through(
    publisher: Any,
    documents: list[dict[str, Any]],
    loop: EventLoop | None,
    payloads: Any = None,
    quarantine: InMemoryStore | None = None,
) -> RelayReport:
    """The documents relayed as the trigger relays them, through `publisher` (an `aio` one on
    `loop`, a sync one with `loop` None); the quarantine in `quarantine` (a new store if
    None)."""
    relay = Relay(
        publisher,
        Quarantine(quarantine if quarantine is not None else InMemoryStore()),
        TELEMETRY,
        payloads=payloads,
    )
    work = relay.relay(read_feed(documents))
    report: RelayReport = loop.run(work) if loop is not None else run_sync(work)
    return report


# -- Service Bus -------------------------------------------------------------------------------


def received(
    stack: LocalStack, sessions: set[str], count: int, wait: float = SHORT, *, exact: bool = True
) -> list[ServiceBusReceivedMessage]:
    """`count` messages of the sessions of the test subscription, in order per session
    (`exact=False`: what arrived by the deadline, however many; `count` 0: what arrived while
    it listened `wait`, a check that none does)."""
    return received_from(stack.servicebus_connection_string, sessions, count, wait, exact=exact)


def received_from(
    connection: str, sessions: set[str], count: int, wait: float = SHORT, *, exact: bool = True
) -> list[ServiceBusReceivedMessage]:
    """`received` from the endpoint of `connection`: each session read on a thread of its own
    (opening a session receiver costs the sync SDK about half a second) until `count` messages
    arrived in all (or `wait`, a deadline, passed), then until it has no more for a second (so a
    duplicate would be seen). A relay that starts later than the reader is waited for. A session
    is held `SESSION_TURN` at most at a time (its lock is a minute)."""
    found: list[ServiceBusReceivedMessage] = []
    lock = threading.Lock()
    deadline = time.monotonic() + wait

    def turn(client: ServiceBusClient, session: str) -> bool:
        """One hold of the session; whether the reading is done."""
        until = min(deadline, time.monotonic() + SESSION_TURN)
        with client.get_subscription_receiver(
            TOPIC, SUBSCRIPTION, session_id=session, max_wait_time=1
        ) as receiver:
            while time.monotonic() < until:
                batch = receiver.receive_messages(max_message_count=100, max_wait_time=1)
                for message in batch:
                    receiver.complete_message(message)
                with lock:
                    found.extend(batch)
                    enough = len(found) >= count
                if not batch and enough and count:  # (none expected: listened to the end)
                    return True
        return time.monotonic() >= deadline

    def read(session: str) -> None:
        with ServiceBusClient.from_connection_string(connection) as client:
            while not turn(client, session):
                pass

    with ThreadPoolExecutor(max_workers=min(16, len(sessions) or 1)) as pool:
        list(pool.map(read, sorted(sessions)))
    assert len(found) >= count or not exact, f"{len(found)} of {count} messages within {wait:g} s"
    return found


def properties(message: ServiceBusReceivedMessage) -> dict[str, Any]:
    """A received message's application properties, names and text values decoded."""

    def text(value: Any) -> Any:
        return value.decode() if isinstance(value, bytes) else value

    return {text(k): text(v) for k, v in (message.application_properties or {}).items()}
