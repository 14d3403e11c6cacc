"""The package's tests run on the in-memory services of its test kit (`cosmos_outbox.testing`),
with a small app of their own (tickets.py) built on the public API."""

from __future__ import annotations

import json
from typing import Any

import azure.functions as func
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
