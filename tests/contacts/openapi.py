"""The app's OpenAPI document, as its `openapi` function serves it (the indexed function,
called in process: no host, no I/O)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any
from unittest import mock

import azure.functions as func

from cosmos_outbox_testing import InvocationContext
from tests.contacts.conftest import indexed_functions


def openapi_document(settings: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The document the app serves with its default settings, or with `settings` over the
    process's environment (the document says the HTTP bound in force, `HTTP_BOUND_SECONDS`):
    then an app of its own is indexed under them."""
    req = func.HttpRequest(
        "GET", "http://localhost/api/openapi.json", headers={}, params={}, body=b""
    )
    if settings is None:
        function = indexed_functions()["openapi"].get_user_function()
    else:
        from entrypoints.bootstrap import bootstrap

        with mock.patch.dict(os.environ, settings):
            app = bootstrap()
        indexed = {str(f.get_function_name()): f for f in app.get_functions()}
        function = indexed["openapi"].get_user_function()
    response = function(req, InvocationContext("openapi"))
    assert response.status_code == 200, response.get_body()
    document: dict[str, Any] = json.loads(response.get_body())
    return document
