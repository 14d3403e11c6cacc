"""The app on cosmos-outbox's in-memory services, called in-process as the host would."""

from __future__ import annotations

import pytest

from cosmos_outbox.testing import FunctionClient, InMemory, in_memory
from function_app import create_app


class World:
    def __init__(self) -> None:
        self.memory: InMemory = in_memory()
        self.app = create_app(lambda: self.memory.services)
        self.client = FunctionClient(self.app)


@pytest.fixture
def world() -> World:
    return World()
