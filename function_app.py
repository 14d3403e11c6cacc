"""Azure Functions entrypoint (v2 programming model): bindings -> handlers, nothing else.

No I/O at import: dependencies are built lazily on first use by `entrypoints.bootstrap`.
Container and database names come from app settings through %NAME% expressions. The host cannot
resolve %NAME% in int binding properties, but the worker indexes the app with the app settings
in its environment, so the poll delay, batch size and backlog schedule are read (and validated)
from FEED_POLL_DELAY_MS, MAX_ITEMS_PER_INVOCATION and BACKLOG_ESTIMATE_SCHEDULE at indexing.
"""

from __future__ import annotations

import json

import azure.functions as func

from entrypoints import admin, http
from entrypoints.bootstrap import dependencies
from entrypoints.openapi import openapi_document
from entrypoints.problems import problem_boundary
from entrypoints.relay import estimate_backlog, relay_documents
from entrypoints.routes import FunctionApp, http_routes
from infra.settings import load_trigger_settings

app = FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
trigger_settings = load_trigger_settings()


@app.route(route="contacts", methods=["POST"])
@problem_boundary
def create_contact(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    return http.create_contact(req, dependencies().service, context.trace_context)


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
def patch_contact(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    return http.patch_contact(req, dependencies().service, context.trace_context)


@app.route(route="contacts/{id}/update-name", methods=["POST"])
@problem_boundary
def update_contact_name(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    return http.update_name(req, dependencies().service, context.trace_context)


@app.route(route="contacts/{id}/update-email", methods=["POST"])
@problem_boundary
def update_contact_email(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    return http.update_email(req, dependencies().service, context.trace_context)


@app.route(route="contacts/{id}/update-description", methods=["POST"])
@problem_boundary
def update_contact_description(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    return http.update_description(req, dependencies().service, context.trace_context)


@app.route(route="contacts/{id}/update-company", methods=["POST"])
@problem_boundary
def update_contact_company(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    return http.update_company(req, dependencies().service, context.trace_context)


@app.route(route="contacts/{id}", methods=["DELETE"])
@problem_boundary
def delete_contact(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    return http.delete_contact(req, dependencies().service, context.trace_context)


@app.route(route="health", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
@problem_boundary
def health(req: func.HttpRequest) -> func.HttpResponse:
    http.query(req)
    return http.health(lambda: dependencies().uow)


@app.route(route="openapi.json", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
@problem_boundary
def openapi(req: func.HttpRequest) -> func.HttpResponse:
    http.query(req)
    return func.HttpResponse(json.dumps(openapi_document(app)), mimetype="application/json")


# The operators' routes (README "Operating the outbox"): the host's master key in Azure.
@app.route(route="outbox/status", methods=["GET"], auth_level=func.AuthLevel.ADMIN)
@problem_boundary
def outbox_status(req: func.HttpRequest) -> func.HttpResponse:
    return admin.status(req, dependencies().admin)


@app.route(route="outbox/quarantine", methods=["GET"], auth_level=func.AuthLevel.ADMIN)
@problem_boundary
def list_quarantine(req: func.HttpRequest) -> func.HttpResponse:
    deps = dependencies()
    return admin.list_quarantine(req, deps.admin, deps.quarantine_tokens)


@app.route(route="outbox/quarantine/{eventId}/replay", methods=["POST"],
           auth_level=func.AuthLevel.ADMIN)
@problem_boundary
def replay_quarantined(req: func.HttpRequest) -> func.HttpResponse:
    return admin.replay(req, dependencies().admin)


@app.route(route="outbox/quarantine/{eventId}", methods=["DELETE"],
           auth_level=func.AuthLevel.ADMIN)
@problem_boundary
def discard_quarantined(req: func.HttpRequest) -> func.HttpResponse:
    return admin.discard(req, dependencies().admin)


@app.route(route="outbox/redrive", methods=["POST"], auth_level=func.AuthLevel.ADMIN)
@problem_boundary
def redrive_events(req: func.HttpRequest) -> func.HttpResponse:
    return admin.redrive(req, dependencies().admin)


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
    # A new lease (first deployment, lease container reset) starts from the oldest event still
    # stored, not from "now": events written before the relay first ran are not lost.
    start_from_beginning=True,  # type: ignore[arg-type]  # azure-functions 2.3 types it `time`
    feed_poll_delay=trigger_settings.feed_poll_delay_ms,
    max_items_per_invocation=trigger_settings.max_items_per_invocation,
)
def relay_events(documents: func.DocumentList) -> None:
    relay_documents((doc.to_dict() for doc in documents), dependencies().relay)


@app.timer_trigger(
    arg_name="timer",
    schedule=trigger_settings.backlog_estimate_schedule,
    run_on_startup=False,
    use_monitor=False,
)
def outbox_backlog(timer: func.TimerRequest) -> None:
    estimate_backlog(dependencies())
