"""Sample v2 app with a route per auth level (copied into a temp dir as function_app.py).

Each route answers what the function saw: its query (``req.params``), whether the key header
reached it, and whether the keys' settings are in its environment; ``whoami`` the principal
headers App Service Authentication (funcstack's sign-in stand-in) handed it."""

from __future__ import annotations

import json
import os

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)


def _seen(req: func.HttpRequest, level: str) -> func.HttpResponse:
    payload = {
        "level": level,
        "params": dict(req.params),
        "url": req.url,
        "key_header": req.headers.get("x-functions-key") is not None,
        "keys_in_environment": sorted(
            k for k in os.environ if k.endswith("_KEY") and k.startswith("FUNCTIONS_HOST_")
        ),
    }
    return func.HttpResponse(json.dumps(payload), mimetype="application/json")


@app.route(route="open", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def open_route(req: func.HttpRequest) -> func.HttpResponse:
    return _seen(req, "anonymous")


@app.route(route="orders", methods=["GET", "POST"])  # the app's default: function
def business(req: func.HttpRequest) -> func.HttpResponse:
    return _seen(req, "function")


@app.route(route="operators/status", methods=["GET"], auth_level=func.AuthLevel.ADMIN)
def operators(req: func.HttpRequest) -> func.HttpResponse:
    return _seen(req, "admin")


@app.route(route="whoami", methods=["GET", "POST"], auth_level=func.AuthLevel.ANONYMOUS)
def whoami(req: func.HttpRequest) -> func.HttpResponse:
    payload = {
        "principal": req.headers.get("x-ms-client-principal"),
        "id": req.headers.get("x-ms-client-principal-id"),
        "name": req.headers.get("x-ms-client-principal-name"),
        "idp": req.headers.get("x-ms-client-principal-idp"),
        "token": req.headers.get("x-ms-token-aad-access-token"),
        "auth_enabled": os.environ.get("WEBSITE_AUTH_ENABLED"),
        "local_host": os.environ.get("FUNCTIONS_CORETOOLS_ENVIRONMENT"),
        "keys_enforced": os.environ.get("FUNCSTACK_KEYS_ENFORCED"),
        "funcstack_settings": sorted(k for k in os.environ if k.startswith("FUNCSTACK_SIGN_IN")),
    }
    return func.HttpResponse(json.dumps(payload), mimetype="application/json")
