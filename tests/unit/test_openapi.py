from __future__ import annotations

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
