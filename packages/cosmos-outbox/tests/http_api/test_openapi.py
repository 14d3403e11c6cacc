"""The OpenAPI document an app built by `Outbox.function_app` serves (`/openapi.json`): its route
table is the indexed app's, read from each function's one declaration; its request schemas the
validating models; its limits, patterns and headers those the HTTP layer enforces; its errors
problem documents; its security the functions' auth levels. On the tickets app (tickets.py);
the events' schemas: testing/test_checks.py (`check_openapi_events`)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import TicketWorld, body
from tickets import OpenTicket

from cosmos_outbox.http import (
    RequestModel,
    is_page,
    omit_null_defaults,
)


@pytest.fixture(scope="module")
def served() -> tuple[dict[str, Any], TicketWorld]:
    """The document the app serves, and the app (its indexed functions)."""
    world = TicketWorld()
    reply = world.client.request("GET", "openapi.json")
    assert reply.status_code == 200
    return body(reply), world


def test_the_document_is_openapi_3_1_with_every_http_function_of_the_app(
    served: tuple[dict[str, Any], TicketWorld],
) -> None:
    document, world = served
    assert document["openapi"] == "3.1.0"
    documented = {
        (path, method, op["operationId"])
        for path, item in document["paths"].items()
        for method, op in item.items()
    }
    bound = set()
    for name, function in world.client.functions.items():
        if function.is_http_function() and name != "zz_not_routed" and not page(function):
            trigger = json.loads(function.get_function_json())["bindings"][0]
            bound |= {(f"/{trigger['route']}", m.lower(), name) for m in trigger["methods"]}
    assert documented == bound


def page(function: Any) -> bool:
    """A function that serves a page or its files (the operators' console), not an operation."""
    return is_page(function.get_user_function())


def test_a_request_schema_is_the_validating_models(
    served: tuple[dict[str, Any], TicketWorld],
) -> None:
    document, _ = served
    schema = document["components"]["schemas"]["OpenTicket"]
    direct = OpenTicket.model_json_schema(
        by_alias=True, ref_template="#/components/schemas/{model}"
    )
    direct.pop("$defs", None)
    assert schema == direct
    assert schema["additionalProperties"] is False
    post = document["paths"]["/tickets"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/OpenTicket"
    }


def test_every_reference_resolves(served: tuple[dict[str, Any], TicketWorld]) -> None:
    document, _ = served
    text = json.dumps(document)
    schemas = document["components"]["schemas"]
    for ref in {part.split('"')[0] for part in text.split('"$ref": "#/components/schemas/')[1:]}:
        assert ref in schemas, ref


def test_a_models_cross_field_rules_add_to_its_fields_schema() -> None:
    """`omit_null_defaults(extra)`: a property's rule in `extra` is added to what the field's
    type says, not put in its place (a `{"minItems": 1}` alone let null through the schema the
    route refuses), `false` leaves a field out, and the fields `extra` requires are added to
    those the model requires (schemathesis sent a body without the required `reason`)."""
    from pydantic import ConfigDict

    class Numbers(RequestModel):
        model_config = ConfigDict(
            json_schema_extra=omit_null_defaults(
                {
                    "required": ["numbers"],
                    "properties": {"numbers": {"minItems": 1}, "since": False},
                }
            )
        )
        numbers: list[int] = []
        since: str | None = None
        reason: str

    schema = Numbers.model_json_schema(by_alias=True)
    assert schema["properties"]["numbers"] == {
        "default": [],
        "items": {"type": "integer"},
        "minItems": 1,
        "title": "Numbers",
        "type": "array",
    }
    assert schema["properties"]["since"] is False
    assert schema["required"] == ["reason", "numbers"]
