"""The OpenAPI document of an app with the operators' routes: errors as problem documents,
security per route's auth level, paging and id limits (moved from the core's
http_api/test_openapi.py)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from conftest import TicketWorld, body

from cosmos_outbox.http import (
    DEFAULT_PAGE_SIZE,
    ID_PATTERN,
    MAX_PAGE_SIZE,
    TAG_LIST_PATTERN,
    TOKEN_PATTERN,
    is_page,
    operation_of,
)


@pytest.fixture(scope="module")
def served() -> tuple[dict[str, Any], TicketWorld]:
    """The document the app serves, and the app (its indexed functions)."""
    world = TicketWorld()
    reply = world.client.request("GET", "openapi.json")
    assert reply.status_code == 200
    return body(reply), world


def test_errors_are_problem_documents_and_security_is_each_routes_auth_level(
    served: tuple[dict[str, Any], TicketWorld],
) -> None:
    document, _ = served
    paths = document["paths"]
    for path, item in paths.items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    assert set(response["content"]) == {"application/problem+json"}, (
                        path,
                        method,
                        status,
                    )
    assert document["components"]["schemas"]["Problem"]["required"] == [
        "title",
        "status",
        "detail",
    ]
    key: list[dict[str, list[str]]] = [{"functionKey": []}, {"functionKeyQuery": []}]
    # the operators' routes take the master key in its header only (a key in a URL is refused)
    master: list[dict[str, list[str]]] = [{"masterKey": []}]
    assert paths["/tickets/{id}"]["get"]["security"] == key
    assert paths["/outbox/status"]["get"]["security"] == master
    assert paths["/health"]["get"]["security"] == paths["/openapi.json"]["get"]["security"] == []


def test_paging_id_and_header_limits_are_the_ones_the_http_layer_enforces(
    served: tuple[dict[str, Any], TicketWorld],
) -> None:
    document, _ = served
    paths = document["paths"]
    listed = paths["/outbox/quarantine"]["get"]
    page_size = next(p for p in listed["parameters"] if p["name"] == "pageSize")["schema"]
    assert (page_size["maximum"], page_size["default"]) == (MAX_PAGE_SIZE, DEFAULT_PAGE_SIZE)
    headers = listed["responses"]["200"]["headers"]
    assert headers["X-Continuation-Token"]["schema"]["pattern"] == TOKEN_PATTERN
    read = paths["/tickets/{id}"]["get"]
    parameters = {p["name"]: p["schema"] for p in read["parameters"]}
    assert parameters["id"]["pattern"] == ID_PATTERN
    assert re.fullmatch(ID_PATTERN, "a" * 128) and not re.fullmatch(ID_PATTERN, "a" * 129)
    assert not re.fullmatch(ID_PATTERN, "-leading-dash")
    assert parameters["If-Match"]["pattern"] == parameters["If-None-Match"]["pattern"]
    assert parameters["If-Match"]["pattern"] == TAG_LIST_PATTERN
    assert "content" not in read["responses"]["304"]
    created = paths["/tickets"]["post"]["responses"]["201"]["headers"]
    assert created["Location"]["required"] and created["ETag"]["required"]
    throttled = paths["/tickets"]["post"]["responses"]["429"]
    assert throttled["headers"]["Retry-After"]["required"]


def page(function: Any) -> bool:
    """A function that serves a page or its files (the operators' console), not an operation."""
    return is_page(function.get_user_function())


def test_every_http_function_but_the_fallback_is_a_declared_operation_indexed_as_declared(
    served: tuple[dict[str, Any], TicketWorld],
) -> None:
    _, world = served
    functions = world.client.functions
    declared = {n for n, f in functions.items() if operation_of(f.get_user_function())}
    pages = {n for n, f in functions.items() if page(f)}
    assert pages == {"console_page", "console_static"}  # the operators' console: not the API
    http = {n for n, f in functions.items() if f.is_http_function()}
    assert declared == http - {"zz_not_routed"} - pages
    for function in functions.values():
        op = operation_of(function.get_user_function())
        if op is None:
            continue
        trigger = json.loads(function.get_function_json())["bindings"][0]
        assert (trigger["route"], trigger["methods"], trigger["authLevel"]) == (
            op.route,
            [op.method],
            op.auth_level.name,
        )
