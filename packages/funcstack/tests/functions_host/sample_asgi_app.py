"""Sample ASGI app (FastAPI) served by ``func.AsgiFunctionApp``, with an HTTP function beside it
(copied into a temp dir as function_app.py). Its routes carry no prefix of their own: the test
hosts it with host.json ``routePrefix: ""``, as the Azure host requires for an ASGI app."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator

import azure.functions as func
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

api = FastAPI()

EVERY_METHOD = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


@api.api_route("/echo/{rest:path}", methods=EVERY_METHOD)
async def echo(request: Request, rest: str) -> Response:
    """What the ASGI app sees of the request: its scope as the library's middleware made it."""
    body = await request.body()
    scope = request.scope
    return JSONResponse(
        {
            "method": scope["method"],
            "path": scope["path"],
            "raw_path": scope["raw_path"].decode("latin-1"),
            "root_path": scope["root_path"],
            "query_string": scope["query_string"].decode("latin-1"),
            "query": [list(item) for item in request.query_params.multi_items()],
            "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]],
            "server": list(scope["server"]) if scope["server"] else None,
            "rest": rest,
            "body_length": len(body),
            "body_sha256": hashlib.sha256(body).hexdigest(),
        },
        headers={"x-echo": "yes"},
    )


@api.post("/json")
async def json_echo(payload: dict[str, object]) -> dict[str, object]:
    return {"received": payload}


@api.post("/bytes")
async def bytes_echo(request: Request) -> Response:
    return Response(await request.body(), media_type="application/octet-stream")


@api.get("/status/{code}")
async def status(code: int) -> Response:
    headers = {"etag": '"v1"'} if code == 304 else {"x-status": str(code)}
    return Response(status_code=code, headers=headers)


@api.get("/cookies")
async def cookies() -> Response:
    response = JSONResponse({"cookies": 3})
    response.set_cookie(
        "session",
        "a b/c",
        httponly=True,
        secure=True,
        samesite="strict",
        max_age=3600,
        path="/app",
        domain="example.com",
    )
    response.set_cookie("theme", "dark")
    response.delete_cookie("old")
    response.headers.append("x-repeated", "one")
    response.headers.append("x-repeated", "two")
    return response


@api.get("/stream")
async def stream() -> StreamingResponse:
    async def chunks() -> AsyncIterator[bytes]:
        for i in range(5):
            await asyncio.sleep(0.01)
            yield f"chunk {i}\n".encode()

    return StreamingResponse(chunks(), media_type="text/plain")


@api.get("/boom")
async def boom() -> Response:
    raise RuntimeError("secret internal detail")


@api.api_route("/only-get-head", methods=["GET", "HEAD"])
async def only_get_head() -> Response:
    return Response(b"body of GET", media_type="text/plain", headers={"x-head": "yes"})


@api.get("/")
async def root() -> dict[str, str]:
    return {"at": "root"}


app = func.AsgiFunctionApp(app=api, http_auth_level=func.AuthLevel.FUNCTION)


# Beside the ASGI function (``http_app_func``): the host tries the routes in the order of the
# functions' names, so "health" comes before it and "status_page" after it.
@app.route(route="health", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def health(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("healthy from the http function")


@app.route(route="status-page", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def status_page(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("status from the http function")
