from __future__ import annotations

import json

from application.commands import CreateContact
from entrypoints.openapi import OPERATIONS, openapi_document


def test_the_document_is_openapi_3_1_with_every_operation() -> None:
    doc = openapi_document()
    assert doc["openapi"] == "3.1.0"
    operations = {(path, method) for path, item in doc["paths"].items() for method in item}
    assert operations == {(f"/{op.route}", op.method.lower()) for op in OPERATIONS}


def test_request_schemas_are_the_validating_models() -> None:
    schemas = openapi_document()["components"]["schemas"]
    create = schemas["CreateContact"]
    direct = CreateContact.model_json_schema(
        by_alias=True, ref_template="#/components/schemas/{model}"
    )
    direct.pop("$defs", None)
    assert create == direct
    assert create["additionalProperties"] is False
    assert create["properties"]["firstName"]["maxLength"] == 100
    assert set(create["required"]) == {"firstName", "lastName", "email"}
    post = openapi_document()["paths"]["/contacts"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/CreateContact"}


def test_every_reference_resolves() -> None:
    import json

    doc = openapi_document()
    text = json.dumps(doc)
    schemas = doc["components"]["schemas"]
    for ref in {part.split('"')[0] for part in text.split('"$ref": "#/components/schemas/')[1:]}:
        assert ref in schemas, ref


def test_errors_are_problem_documents_and_contact_routes_need_a_key() -> None:
    doc = openapi_document()
    get = doc["paths"]["/contacts/{id}"]["get"]
    assert get["responses"]["404"]["content"]["application/problem+json"]
    assert get["security"] == [{"functionKey": []}, {"functionKeyQuery": []}]
    assert doc["paths"]["/health"]["get"]["security"] == []


def test_response_headers_patterns_formats_and_cross_field_rules_are_declared() -> None:
    from application.conditional import TAG_LIST_PATTERN
    from entrypoints.http import ID_PATTERN
    from entrypoints.paging import TOKEN_PATTERN

    doc = openapi_document()
    paths, schemas = doc["paths"], doc["components"]["schemas"]
    created = paths["/contacts"]["post"]["responses"]["201"]["headers"]
    assert created["Location"]["required"] and created["ETag"]["required"]
    listed = paths["/contacts"]["get"]
    assert listed["responses"]["200"]["headers"]["X-Continuation-Token"]["schema"]["pattern"] \
        == TOKEN_PATTERN
    get = paths["/contacts/{id}"]["get"]
    assert get["parameters"][0]["schema"]["pattern"] == ID_PATTERN
    assert {p["name"]: p["schema"]["pattern"] for p in get["parameters"][1:]} == {
        "If-Match": TAG_LIST_PATTERN, "ETag": TAG_LIST_PATTERN, "If-None-Match": TAG_LIST_PATTERN}
    for status in ("304",):
        assert "content" not in get["responses"][status]
    for route in ("update-name", "update-email", "update-description", "update-company"):
        no_content = paths[f"/contacts/{{id}}/{route}"]["post"]["responses"]["204"]
        assert "content" not in no_content and no_content["headers"]["ETag"]["required"]
    assert schemas["CreateContact"]["properties"]["email"]["format"] == "email"
    assert schemas["CreateContact"]["oneOf"] == [{"required": ["companyName"]},
                                                 {"required": ["company"]}]
    assert schemas["PatchContact"]["minProperties"] == 1
    assert "null" not in json.dumps(schemas["PatchContact"]["properties"])
    assert schemas["Problem"]["required"] == ["title", "status", "detail"]
    throttled = paths["/contacts"]["post"]["responses"]["429"]
    assert throttled["headers"]["Retry-After"]["required"]
