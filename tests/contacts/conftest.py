"""Shared fixtures. `world`: the Contacts app built by its composition root on cosmos-outbox's
in-memory services (`cosmos_outbox_testing.in_memory`) and the in-memory contact list; its
functions are called in-process (`world.functions`, `world.client`). `functions`: the indexed
functions of the app as deployed (`function_app.app`), for what is read without calling them
(binding metadata, the OpenAPI document)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import pytest
from azure.functions.decorators.function_app import Function

from application.contacts.ports import ContactList
from cosmos_outbox import Outbox
from cosmos_outbox.aggregates import UnitOfWork
from cosmos_outbox.http import TokenCodec
from cosmos_outbox_testing import FunctionClient, in_memory
from domain.contact import Contact
from entrypoints.bootstrap import CONTACTS_TOKEN_PURPOSE, LEGACY_EVENTS, bootstrap
from tests.contacts.fakes import InMemoryContactList

_INDEXED: dict[str, Function] | None = None


def indexed_functions() -> dict[str, Function]:
    """The deployed app's functions, indexed once per process (`get_functions()` builds them
    once)."""
    global _INDEXED
    if _INDEXED is None:
        import function_app

        _INDEXED = {str(f.get_function_name()): f for f in function_app.app.get_functions()}
    return _INDEXED


@pytest.fixture(scope="session")
def functions() -> dict[str, Function]:
    return indexed_functions()


class FakeWorld:
    """The app on fakes (`options`: `in_memory`'s). The outbox's store, publisher and backlog
    are cosmos-outbox's fakes, which a test makes fail or race (`store.fail_next`,
    `publisher.fail_on_send`, ...); `contacts` may be swapped by a test (a contact list that
    misbehaves); the app reads it on every call."""

    def __init__(self, **options: Any) -> None:
        memory = in_memory(**options)
        self.memory = memory
        self.store, self.publisher, self.backlog = memory.store, memory.publisher, memory.backlog
        self.payloads = memory.payloads
        self.services = memory.services
        self.contacts: Callable[[], ContactList] = lambda: InMemoryContactList(self.store)
        #: the Contacts app's outbox on the same services, for what a test writes or relays
        #: itself (the app's own is inside `bootstrap`)
        self.outbox = Outbox(
            (Contact,), services=lambda: self.services, legacy_events=LEGACY_EVENTS
        )
        #: seals the contact list's tokens, as the app does
        self.tokens = TokenCodec(self.services.token_key(CONTACTS_TOKEN_PURPOSE))
        self.app = bootstrap(lambda: self.services, lambda _: self.contacts())
        self.client = FunctionClient(self.app)
        self.functions = self.client.functions

    def uow(self) -> UnitOfWork:
        """A unit of work on the app's store (to write contacts behind the API's back)."""
        return self.outbox.unit_of_work()

    def relay(self, documents: Iterable[Mapping[str, Any]]) -> None:
        """Hand stored documents to the app's relay, as the change-feed trigger does."""
        self.client.relay(documents)


@pytest.fixture
def world() -> Iterator[FakeWorld]:
    world = FakeWorld()
    try:
        yield world
    finally:
        world.client.close()
