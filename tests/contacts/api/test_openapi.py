"""The Contacts app's OpenAPI document: its request schemas are the app's validating models, its
view every field the API returns, its routes the auth level, headers, formats and cross-field
rules the app declares. How any app's document is made (its route table the indexed app's, its
references, limits and problems the HTTP layer's) is the library's, proven in its package
(packages/cosmos-outbox/tests/http_api/test_openapi.py)."""

from __future__ import annotations

import json
from typing import Any

from application.contacts.commands import CreateContact
from application.contacts.views import ContactView
from tests.contacts.openapi import openapi_document


def document() -> dict[str, Any]:
    return openapi_document()


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


def test_contact_routes_need_a_key_and_health_none() -> None:
    doc = document()
    get = doc["paths"]["/contacts/{id}"]["get"]
    assert get["security"] == [{"functionKey": []}, {"functionKeyQuery": []}]
    assert doc["paths"]["/health"]["get"]["security"] == []


def test_response_headers_patterns_formats_and_cross_field_rules_are_declared() -> None:
    from cosmos_outbox.http import ID_PATTERN, TAG_LIST_PATTERN, TOKEN_PATTERN

    doc = document()
    paths, schemas = doc["paths"], doc["components"]["schemas"]
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
