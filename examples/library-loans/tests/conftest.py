"""The app on cosmos-outbox's in-memory services, its functions called in-process as the host
would (the FastAPI app through `func.AsgiFunctionApp`'s function, as in Azure): its writes
through the transaction, its own SQL queries through the store, both served by the test kit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from loans.outbox import outbox

from cosmos_outbox_testing import FunctionClient, InMemory, in_memory
from function_app import app


class World:
    def __init__(self, memory: InMemory, client: FunctionClient) -> None:
        self.memory, self.client = memory, client

    def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        reply = self.client.request(method, f"api/{path}", body=body, headers=headers)
        raw = reply.get_body()
        return reply.status_code, json.loads(raw) if raw else None

    def borrow(self, member: str, book: str, key: str | None = None) -> tuple[int, Any]:
        return self.call(
            "POST",
            f"members/{member}/loans",
            {"bookId": book},
            {"Idempotency-Key": key} if key else None,
        )

    def events(self) -> list[dict[str, Any]]:
        """The events committed, as subscribers read them (envelope and data in one object:
        `action`, `version`, `memberId`, ...), in order per member."""
        return [e.envelope_and_data() for e in self.memory.events()]


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv("LOAN_LIMIT", "2")
    monkeypatch.setenv("LOAN_DAYS", "14")
    # host.json's route prefix is "": the FastAPI routes carry /api themselves.
    with in_memory(outbox) as memory, FunctionClient(app, route_prefix="") as client:
        yield World(memory, client)
