"""Azure Functions entrypoint (v2 programming model): bindings -> handlers, nothing else.

No I/O and no settings are read at import: dependencies are built lazily on first use by
`entrypoints.bootstrap`. Container and database names come from app settings through %NAME%
expressions. The trigger's poll delay and batch size are literals because the host cannot
resolve %NAME% in int binding properties.
"""

from __future__ import annotations

import json

import azure.functions as func

from entrypoints import http
from entrypoints.bootstrap import dependencies
from entrypoints.openapi import openapi_document
from entrypoints.problems import problem_boundary
from entrypoints.relay import relay_documents
from entrypoints.routes import FunctionApp, http_routes
from infra.settings import DEFAULT_FEED_POLL_DELAY_MS, DEFAULT_MAX_ITEMS_PER_INVOCATION

app = FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)


@app.route(route="contacts", methods=["POST"])
@problem_boundary
def create_contact(req: func.HttpRequest) -> func.HttpResponse:
    return http.create_contact(req, dependencies().service)


@app.route(route="contacts", methods=["GET"])
@problem_boundary
def list_contacts(req: func.HttpRequest) -> func.HttpResponse:
    deps = dependencies()
    return http.list_contacts(req, deps.service, deps.tokens)


@app.route(route="contacts/{id}", methods=["GET"])
@problem_boundary
def get_contact(req: func.HttpRequest) -> func.HttpResponse:
    return http.get_contact(req, dependencies().service)


@app.route(route="contacts/{id}", methods=["PATCH"])
@problem_boundary
def patch_contact(req: func.HttpRequest) -> func.HttpResponse:
    return http.patch_contact(req, dependencies().service)


@app.route(route="contacts/{id}/update-name", methods=["POST"])
@problem_boundary
def update_contact_name(req: func.HttpRequest) -> func.HttpResponse:
    return http.update_name(req, dependencies().service)


@app.route(route="contacts/{id}/update-email", methods=["POST"])
@problem_boundary
def update_contact_email(req: func.HttpRequest) -> func.HttpResponse:
    return http.update_email(req, dependencies().service)


@app.route(route="contacts/{id}/update-description", methods=["POST"])
@problem_boundary
def update_contact_description(req: func.HttpRequest) -> func.HttpResponse:
    return http.update_description(req, dependencies().service)


@app.route(route="contacts/{id}/update-company", methods=["POST"])
@problem_boundary
def update_contact_company(req: func.HttpRequest) -> func.HttpResponse:
    return http.update_company(req, dependencies().service)


@app.route(route="contacts/{id}", methods=["DELETE"])
@problem_boundary
def delete_contact(req: func.HttpRequest) -> func.HttpResponse:
    return http.delete_contact(req, dependencies().service)


@app.route(route="health", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
@problem_boundary
def health(req: func.HttpRequest) -> func.HttpResponse:
    http.query(req)
    return http.health(lambda: dependencies().uow)


@app.route(route="openapi.json", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
@problem_boundary
def openapi(req: func.HttpRequest) -> func.HttpResponse:
    http.query(req)
    return func.HttpResponse(json.dumps(openapi_document()), mimetype="application/json")


# Lowest precedence (the host ranks catch-all routes last): whatever no function above takes
# gets a problem document, 404, or 405 with the `Allow` of the app's own routes.
@app.route(route="{*path}", methods=None,
           auth_level=func.AuthLevel.ANONYMOUS)
@problem_boundary
def not_routed(req: func.HttpRequest) -> func.HttpResponse:
    return http.fallback(req, http_routes(app.get_functions()))


@app.retry(
    strategy="exponential_backoff",
    max_retry_count="-1",
    minimum_interval="00:00:01",
    maximum_interval="00:01:00",
)
@app.cosmos_db_trigger(
    arg_name="documents",
    connection="CosmosDBConnection",
    database_name="%COSMOS_DATABASE%",
    container_name="%COSMOS_CONTAINER%",
    lease_container_name="%COSMOS_LEASE_CONTAINER%",
    create_lease_container_if_not_exists=True,
    feed_poll_delay=DEFAULT_FEED_POLL_DELAY_MS,
    max_items_per_invocation=DEFAULT_MAX_ITEMS_PER_INVOCATION,
)
def relay_events(documents: func.DocumentList) -> None:
    relay_documents((doc.to_dict() for doc in documents), dependencies().relay)
