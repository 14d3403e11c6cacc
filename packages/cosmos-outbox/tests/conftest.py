"""The package's tests run on the in-memory services of its test kit (`cosmos_outbox.testing`),
with a small app of their own (tickets.py) built on the public API."""

from __future__ import annotations

import json
from typing import Any

import azure.functions as func
import pytest
from tickets import Ticket, ticket_routes

from cosmos_outbox import Outbox
from cosmos_outbox._aio import run_sync
from cosmos_outbox._documents import read_feed
from cosmos_outbox._relay.relay import RelayReport
from cosmos_outbox.testing import FunctionClient, InMemory, in_memory


class TicketWorld:
    """The tickets app on in-memory services (`options`: `in_memory`'s)."""

    def __init__(self, *, etag_request_header: bool = False, **options: Any) -> None:
        self.memory: InMemory = in_memory(**options)
        self.outbox = Outbox([Ticket], services=lambda: self.memory.services)
        self.app = self.outbox.function_app(
            ticket_routes(self.outbox, etag_request_header=etag_request_header),
            title="Tickets")
        self.client = FunctionClient(self.app)

    def relay(self, documents: list[dict[str, Any]]) -> RelayReport:
        """The stored documents relayed as the trigger relays them; the report."""
        return run_sync(self.outbox.wiring().relay().relay(read_feed(documents)))


@pytest.fixture
def world() -> TicketWorld:
    return TicketWorld()


def body(response: func.HttpResponse) -> Any:
    """A response's JSON body."""
    return json.loads(response.get_body())


def problem(response: func.HttpResponse, status: int) -> dict[str, Any]:
    """A response's problem+json document, checked to be one with `status`."""
    assert response.status_code == status, response.get_body()
    assert response.mimetype == "application/problem+json"
    document: dict[str, Any] = body(response)
    assert document["status"] == status
    return document
