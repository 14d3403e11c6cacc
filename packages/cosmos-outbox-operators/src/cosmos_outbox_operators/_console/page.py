"""The console page (`<prefix>/console`) and its static files (`<prefix>/console/static/<name>`),
served to a signed-in operator only (`doors.admit_signed_in`; one not signed in is sent to App
Service Authentication's sign-in and back, one refused gets a page saying why). The page is a
frame whose panels load the operators' routes of the signed-in door through htmx, shipped in the
wheel and served from here (the page loads nothing from another origin and works in a closed
network); what htmx does not do is `static/console.js`. Its Content-Security-Policy allows
scripts and styles from this origin only (inline styles too: the chart's SVG carries its own),
no framing, and no form posted elsewhere."""

from __future__ import annotations

import importlib.resources
import logging
from datetime import UTC, datetime, timedelta
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import azure.functions as func

from cosmos_outbox.http import PAGE_ATTRIBUTE
from cosmos_outbox_operators._console.doors import (
    CONSOLE_SEGMENT,
    RefusedError,
    admit_signed_in,
    login_path,
)
from cosmos_outbox_operators._console.guard import (
    CSRF_COOKIE,
    CrossSiteError,
    check_local_host,
    cookie_value,
    new_token,
    token_cookie,
)
from cosmos_outbox_operators._console.identity import principal_of, sign_in_trusted

if TYPE_CHECKING:
    from cosmos_outbox_operators._console.doors import OperatorDoors

__all__ = ["CONTENT_SECURITY_POLICY", "STATIC_FILES", "register_page"]

logger = logging.getLogger("cosmos_outbox.operators")

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
_SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}
#: The files the page loads: name -> (path in this package, media type).
STATIC_FILES = {
    "console.css": ("static/console.css", "text/css"),
    "console.js": ("static/console.js", "text/javascript"),
    "htmx.min.js": ("static/vendor/htmx.min.js", "text/javascript"),
}


@cache
def _static(name: str) -> bytes | None:
    path, _ = STATIC_FILES[name]
    resource = importlib.resources.files("cosmos_outbox_operators._console").joinpath(path)
    try:
        return resource.read_bytes()
    except FileNotFoundError:
        return None


@cache
def _version() -> str:
    try:
        return version("cosmos-outbox")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "source"


def _html(body: str, status: int, headers: dict[str, str] | None = None) -> func.HttpResponse:
    return func.HttpResponse(
        body,
        status_code=status,
        headers={**_SECURITY_HEADERS, "Cache-Control": "no-store", **(headers or {})},
        mimetype="text/html",
        charset="utf-8",
    )


def _https(req: func.HttpRequest) -> bool:
    """Whether the browser reached the app over HTTPS (App Service's front end says so in
    `X-Forwarded-Proto`; the host itself sees plain HTTP)."""
    forwarded = req.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return bool(forwarded == "https" or urlsplit(req.url).scheme == "https")


def _refusal(req: func.HttpRequest, refused: RefusedError) -> func.HttpResponse:
    """The page's answer to someone its door refused: to the sign-in when no one is signed in,
    else the refusal, as a page."""
    url = urlsplit(req.url)
    path = url.path
    status = refused.problem.status
    if status == 401 and sign_in_trusted() and principal_of(req.headers) is None:
        # not signed in: to the platform's sign-in, then back here (with the query: a
        # shared journey's link, ?event=<id>)
        back = f"{path}?{url.query}" if url.query else path
        return func.HttpResponse(
            status_code=302, headers={"Location": login_path(back), "Cache-Control": "no-store"}
        )
    from cosmos_outbox_operators._console.render import page

    return _html(
        page("refused.html", status=status, detail=refused.problem.detail, base=path), status
    )


def register_page(doors: OperatorDoors) -> None:
    """The page and its static files, on the doors' blueprint."""
    page_route = f"{doors.prefix}/{CONSOLE_SEGMENT}"
    role = doors.role

    def console_page(req: func.HttpRequest) -> func.HttpResponse:
        """The operators' console (a signed-in operator's)."""
        base = urlsplit(req.url).path.rstrip("/")
        try:
            check_local_host(req.method, req.headers)  # a page on a rebinding name: refused
            actor = admit_signed_in(req.headers, role=role, return_to=base)
        except CrossSiteError as exc:
            return _refusal(req, RefusedError(403, "Forbidden", str(exc)))
        except RefusedError as refused:
            return _refusal(req, refused)
        from cosmos_outbox_operators._console.render import page

        token = cookie_value(req.headers, CSRF_COOKIE) or new_token()
        html = page(
            "page.html",
            operator=actor,
            base=base,
            csrf_token=token,
            version=_version(),
            htmx_missing=_static("htmx.min.js") is None,
            since_default=(datetime.now(UTC) - timedelta(hours=1))
            .replace(microsecond=0)
            .isoformat()
            .replace("+00:00", "Z"),
        )
        return _html(html, 200, {"Set-Cookie": token_cookie(token, path=base, secure=_https(req))})

    def console_static(req: func.HttpRequest) -> func.HttpResponse:
        """The console page's scripts and styles (a signed-in operator's)."""
        try:
            check_local_host(req.method, req.headers)
            admit_signed_in(req.headers, role=role, return_to=urlsplit(req.url).path)
        except CrossSiteError as exc:
            return RefusedError(403, "Forbidden", str(exc)).response()
        except RefusedError as refused:
            return refused.response()
        name = str(req.route_params.get("name", ""))
        content = _static(name) if name in STATIC_FILES else None
        if content is None:
            if name == "htmx.min.js":
                logger.error(
                    "the console's htmx.min.js is not in this installation of cosmos-outbox: "
                    "install it from a wheel or an sdist (they carry it), or build it where npm "
                    "is available (packages/cosmos-outbox-operators/hatch_build.py)"
                )
            return func.HttpResponse(status_code=404, headers={"Cache-Control": "no-store"})
        return func.HttpResponse(
            content,
            status_code=200,
            headers={
                "Cache-Control": "private, max-age=3600",
                "X-Content-Type-Options": "nosniff",
            },
            mimetype=STATIC_FILES[name][1],
            charset="utf-8",
        )

    for route, function in (
        (page_route, console_page),
        (f"{page_route}/static/{{name}}", console_static),
    ):
        setattr(function, PAGE_ATTRIBUTE, True)  # not an API operation: out of openapi.json
        doors.blueprint.route(route=route, methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)(
            function
        )
