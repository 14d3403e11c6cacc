"""The package's tests run on the in-memory services of its test kit (`cosmos_outbox.testing`),
with a small app of their own (tickets.py) built on the public API."""

from __future__ import annotations

from typing import Any

import pytest
from tickets import ticket_app

from cosmos_outbox.testing import FunctionClient, InMemory, in_memory


class TicketWorld:
    def __init__(self, **options: Any) -> None:
        self.memory: InMemory = in_memory(**options)
        self.app = ticket_app(lambda: self.memory.services)
        self.client = FunctionClient(self.app)


@pytest.fixture
def world() -> TicketWorld:
    return TicketWorld()
