"""The OpenAPI document: its route table is the indexed app's, read from each function's one
declaration; its schemas the validating models, its limits those the HTTP layer enforces; its
events the catalogue's."""

from __future__ import annotations

import json
import re
from typing import Any

from application.contacts.commands import CreateContact
from application.contacts.views import ContactView
from cosmos_outbox.http import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, operation_of
from tests.contacts.openapi import openapi_document


def document() -> dict[str, Any]:
    return openapi_document()


def test_the_document_is_openapi_3_1_with_every_http_function_of_the_app(
    functions: dict[str, Any],
) -> None:
    doc = document()
    assert doc["openapi"] == "3.1.0"
    documented = {
        (path, method, op["operationId"])
        for path, item in doc["paths"].items()
        for method, op in item.items()
    }
    bound = set()
    for name, function in functions.items():
        if function.is_http_function() and name != "zz_not_routed":
            trigger = json.loads(function.get_function_json())["bindings"][0]
            bound |= {(f"/{trigger['route']}", m.lower(), name) for m in trigger["methods"]}
    assert documented == bound


def test_every_http_function_but_the_fallback_is_a_declared_operation(
    functions: dict[str, Any],
) -> None:
    declared = {n for n, f in functions.items() if operation_of(f.get_user_function())}
    http = {n for n, f in functions.items() if f.is_http_function()}
    assert declared == http - {"zz_not_routed"}


def test_the_declaration_is_what_the_function_is_indexed_with(functions: dict[str, Any]) -> None:
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


def test_request_schemas_are_the_validating_models() -> None:
    schemas = document()["components"]["schemas"]
    create = schemas["CreateContact"]
    direct = CreateContact.model_json_schema(
        by_alias=True, ref_template="#/components/schemas/{model}"
    )
    direct.pop("$defs", None)
    assert create == direct
    assert create["additionalProperties"] is False
    assert create["properties"]["firstName"]["maxLength"] == 100
    assert set(create["required"]) == {"firstName", "lastName", "email"}
    post = document()["paths"]["/contacts"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/CreateContact"
    }


def test_the_contact_returned_is_documented_with_every_field_of_the_view() -> None:
    view = document()["components"]["schemas"]["ContactView"]
    fields = {f.alias or name for name, f in ContactView.model_fields.items()}
    assert set(view["properties"]) == fields
    assert {"id", "version", "name", "email", "createdAt", "modifiedAt"} <= fields
    assert not {"deleted", "deletedAt"} & fields  # the contact's deletion marks stay inside
    assert set(view["required"]) == set(view["properties"])


def test_paging_and_id_limits_are_the_ones_the_http_layer_enforces() -> None:
    get = document()["paths"]["/contacts"]["get"]
    page_size = next(p for p in get["parameters"] if p["name"] == "pageSize")["schema"]
    assert (page_size["maximum"], page_size["default"]) == (MAX_PAGE_SIZE, DEFAULT_PAGE_SIZE)
    one = document()["paths"]["/contacts/{id}"]["get"]
    pattern = next(p for p in one["parameters"] if p["name"] == "id")["schema"]["pattern"]
    assert re.fullmatch(pattern, "a" * 128) and not re.fullmatch(pattern, "a" * 129)
    assert not re.fullmatch(pattern, "-leading-dash")


def test_every_reference_resolves() -> None:
    doc = document()
    text = json.dumps(doc)
    schemas = doc["components"]["schemas"]
    for ref in {part.split('"')[0] for part in text.split('"$ref": "#/components/schemas/')[1:]}:
        assert ref in schemas, ref


def test_errors_are_problem_documents_and_contact_routes_need_a_key() -> None:
    doc = document()
    get = doc["paths"]["/contacts/{id}"]["get"]
    assert get["responses"]["404"]["content"]["application/problem+json"]
    assert get["security"] == [{"functionKey": []}, {"functionKeyQuery": []}]
    assert doc["paths"]["/health"]["get"]["security"] == []


def test_response_headers_patterns_formats_and_cross_field_rules_are_declared() -> None:
    from cosmos_outbox.http import ID_PATTERN, TAG_LIST_PATTERN, TOKEN_PATTERN

    doc = document()
    paths, schemas = doc["paths"], doc["components"]["schemas"]
    created = paths["/contacts"]["post"]["responses"]["201"]["headers"]
    assert created["Location"]["required"] and created["ETag"]["required"]
    listed = paths["/contacts"]["get"]
    assert (
        listed["responses"]["200"]["headers"]["X-Continuation-Token"]["schema"]["pattern"]
        == TOKEN_PATTERN
    )
    get = paths["/contacts/{id}"]["get"]
    assert get["parameters"][0]["schema"]["pattern"] == ID_PATTERN
    assert {p["name"]: p["schema"]["pattern"] for p in get["parameters"][1:]} == {
        "If-Match": TAG_LIST_PATTERN,
        "ETag": TAG_LIST_PATTERN,
        "If-None-Match": TAG_LIST_PATTERN,
    }
    for status in ("304",):
        assert "content" not in get["responses"][status]
    for route in ("update-name", "update-email", "update-description", "update-company"):
        no_content = paths[f"/contacts/{{id}}/{route}"]["post"]["responses"]["204"]
        assert "content" not in no_content and no_content["headers"]["ETag"]["required"]
    assert schemas["CreateContact"]["properties"]["email"]["format"] == "email"
    assert schemas["CreateContact"]["oneOf"] == [
        {"required": ["companyName"]},
        {"required": ["company"]},
    ]
    assert schemas["PatchContact"]["minProperties"] == 1
    assert "null" not in json.dumps(schemas["PatchContact"]["properties"])
    assert schemas["Problem"]["required"] == ["title", "status", "detail"]
    throttled = paths["/contacts"]["post"]["responses"]["429"]
    assert throttled["headers"]["Retry-After"]["required"]
