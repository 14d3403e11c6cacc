"""Shared fixtures. `world`: the Contacts app built by its composition root on cosmos-outbox's
in-memory services (`cosmos_outbox.testing.in_memory`) and the in-memory contact list; its
functions are called in-process (`world.functions`, `world.client`). `functions`: the indexed
functions of the app as deployed (`function_app.app`), for what is read without calling them
(binding metadata, the OpenAPI document)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from azure.functions.decorators.function_app import Function

from application.contacts.ports import ContactList
from cosmos_outbox._blueprints.outbox import OutboxDependencies
from cosmos_outbox.http._paging import TokenCodec, derive_key
from cosmos_outbox.ports import UnitOfWork
from cosmos_outbox.testing import TEST_SECRET, FunctionClient, in_memory, uow_factory
from entrypoints.bootstrap import CONTACTS_TOKEN_PURPOSE, bootstrap
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
    """The app on fakes. `uow` and `contacts` may be swapped by a test (a store that fails, a
    racing writer); the app reads them on every call."""

    def __init__(self, **options: Any) -> None:
        memory = in_memory(**options)
        self.store, self.publisher = memory.store, memory.publisher
        self.quarantine, self.backlog = memory.quarantine, memory.backlog
        self.uow: Callable[[], UnitOfWork] = uow_factory(self.store)
        self.contacts: Callable[[], ContactList] = lambda: InMemoryContactList(self.store)
        self.services = dataclasses.replace(memory.services, unit_of_work=lambda: self.uow())
        self.outbox: OutboxDependencies = self.services.outbox
        #: seals the contact list's tokens, as the app does
        self.tokens = TokenCodec(derive_key(TEST_SECRET, purpose=CONTACTS_TOKEN_PURPOSE))
        self.app = bootstrap(lambda: self.services, lambda _: self.contacts())
        self.client = FunctionClient(self.app)
        self.functions = self.client.functions


@pytest.fixture
def world() -> Iterator[FakeWorld]:
    yield FakeWorld()
