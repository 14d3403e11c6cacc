"""The app's OpenAPI document, as its `openapi` function serves it (the indexed function,
called in process: no host, no I/O)."""

from __future__ import annotations

import json
from typing import Any

import azure.functions as func

from cosmos_outbox_testing import InvocationContext
from tests.contacts.conftest import indexed_functions


def openapi_document() -> dict[str, Any]:
    req = func.HttpRequest(
        "GET", "http://localhost/api/openapi.json", headers={}, params={}, body=b""
    )
    function = indexed_functions()["openapi"].get_user_function()
    response = function(req, InvocationContext("openapi"))
    assert response.status_code == 200, response.get_body()
    document: dict[str, Any] = json.loads(response.get_body())
    return document
