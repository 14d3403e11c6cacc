"""The app on cosmos-outbox's in-memory services, called in-process as the host would."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cosmos_outbox_testing import FunctionClient, InMemory, in_memory
from function_app import app, outbox


class World:
    def __init__(self, memory: InMemory) -> None:
        self.memory = memory
        self.app = app
        self.client = FunctionClient(app)


@pytest.fixture
def world() -> Iterator[World]:
    with in_memory(outbox) as memory:
        yield World(memory)
