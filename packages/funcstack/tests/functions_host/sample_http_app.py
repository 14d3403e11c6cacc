"""Sample v2 app used by the runner tests (copied into a temp dir as function_app.py)."""

from __future__ import annotations

import asyncio
import json
import os

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)


@app.route(route="items/{id}", methods=["GET"])
def get_item(req: func.HttpRequest) -> func.HttpResponse:
    payload = {
        "id": req.route_params["id"],
        "params": dict(req.params),
        "x_test": req.headers.get("x-test"),
        "method": req.method,
        "url": req.url,
    }
    return func.HttpResponse(json.dumps(payload), mimetype="application/json")


@app.route(route="items/{id:guid}/echo", methods=["POST", "PUT"])
async def echo_item(req: func.HttpRequest) -> func.HttpResponse:
    await asyncio.sleep(0)
    return func.HttpResponse(
        req.get_body(),
        status_code=201,
        headers={"Location": f"/api/items/{req.route_params['id']}", "X-Async": "yes"},
        mimetype="application/octet-stream",
    )


@app.route(route="items", methods=["GET"])
def list_items(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("list", status_code=200)


@app.route(route="items", methods=["POST"])
def create_item(req: func.HttpRequest) -> func.HttpResponse:
    body = req.get_json()
    return func.HttpResponse(json.dumps(body), status_code=201, mimetype="application/json")


@app.route(route="status/{code:int}")
def status(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(status_code=int(req.route_params["code"]))


@app.route(route="files/{*rest}", methods=["GET"])
def files(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(req.route_params.get("rest", ""))


@app.route(route="greeting", methods=["GET"])
def greeting(req: func.HttpRequest) -> str:
    return "Grüße, 世界 ✓"


@app.route(route="boom")
def boom(req: func.HttpRequest) -> func.HttpResponse:
    raise RuntimeError("secret internal detail")


@app.route(route="setting", methods=["GET"])
def setting(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(os.environ.get("SAMPLE_SETTING", "<unset>"))


@app.function_name("renamed")
@app.route(route="%SAMPLE_ROUTE%", methods=["GET"])
def routed_by_setting(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("from setting route")


@app.route(route="ctx", methods=["GET"])
def with_context(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    payload = {
        "function_name": context.function_name,
        "invocation_id": context.invocation_id,
        "traceparent": context.trace_context.trace_parent,
    }
    return func.HttpResponse(json.dumps(payload), mimetype="application/json")


@app.route(route="disabled", methods=["GET"])
def disabled_fn(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("should not be served")
