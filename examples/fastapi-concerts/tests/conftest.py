"""The app on cosmos-outbox's in-memory services, its functions called in-process as the host
would (the FastAPI app through `func.AsgiFunctionApp`'s function, as in Azure)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import azure.functions as func
import pytest
from concerts.outbox import outbox

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

    def events(self) -> list[dict[str, Any]]:
        """The events committed, as subscribers read them (envelope and data in one object:
        `action`, `version`, `concertId`, ...), in order per concert."""
        return [e.envelope_and_data() for e in self.memory.events()]


@pytest.fixture
def world() -> Iterator[World]:
    # host.json's route prefix is "": the FastAPI routes carry /api themselves.
    with in_memory(outbox) as memory, FunctionClient(app, route_prefix="") as client:
        yield World(memory, client)


def body_of(reply: func.HttpResponse) -> Any:
    return json.loads(reply.get_body())
