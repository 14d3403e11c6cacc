"""HTTP triggers: requests become ``RpcHttp`` invocations and responses come back the host's way.

The mapping follows the Functions host (``GrpcMessageConversionExtensions.ToRpcHttp`` and
``RawScriptResult``) for a worker with the Python worker's capabilities (``RawHttpBodyBytes``,
``RpcHttpBodyOnly``, no nullable dictionaries):

* header names lower-cased; a repeated header's values joined with ``,``;
* query values joined with ``,`` when a key repeats; keys with an empty value are dropped;
* route values in ``params`` (absent optional ones left out); the body as bytes, sent only
  when ``Content-Length`` is above 0;
* ``url`` as the host writes it: ``http://`` + the ``Host`` header + the path as Kestrel decoded
  it, escaped again as ASP.NET Core's ``PathString`` does, + the query string as sent;
* the function's ``RpcHttp`` answer: status (200 when empty), headers (a map: one value per
  name, the first of names that differ only in case), ``content-type``, body, then one
  ``Set-Cookie`` line per ``RpcHttpCookie`` as ASP.NET Core's ``ResponseCookies.Append`` writes
  it;
* the answer is the function's HTTP output (``$return``, or the output named by
  ``binding_arg_name``; ``_bindings/http.py``); none set -> 200 with no body (``OkResult``), and
  a ``$return`` bound to another output (a queue message) goes there, not to the caller;
* a failed invocation (an output binding that could not be written included) -> 500 with no
  body; no route that takes the path and the method -> 404
  with no body (the host has no 405); the routes tried in the order of the functions' names,
  the first that matches winning (a ``RouteCollection``, no precedence between templates);
* the path matched as Kestrel hands it to routing: percent-escapes decoded except ``%2F``,
  which stays ``%2F`` inside its segment (so ``items/%2F`` is ``items/{id}`` with the
  value ``%2F``, never ``items/``), dot segments removed, empty segments kept (``a//b``
  matches no ``{id}`` route);
* a route template ASP.NET Core refuses (``routePrefix/route`` with ``//``) stops the start, as
  it stops the host's;
* before routing, Kestrel's limits and timeouts (``http_server``) and, when configured, CORS as
  ``func start`` applies it (``cors``);
* with ``keys`` (opt-in), after routing and before the body is read, the function's auth level
  as the Azure host enforces it (``_keys``): 401 with no body without a key that grants it;
* with ``sign_in`` (opt-in), in front of everything else as App Service Authentication is in
  front of the host (``_sign_in``): ``/.auth/...`` answered, and the principal headers of the
  request's session (client-sent ones removed).
* the host's own endpoints (``_host_endpoints``): ``/admin/host/ping`` and
  ``/admin/host/status`` before the functions' routes, the landing page for ``/`` when no
  function takes it.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import logging
import math
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote_to_bytes

from aiohttp import web
from multidict import CIMultiDict

from funcstack.functions_host._bindings.http import http_output_name, response_value
from funcstack.functions_host._config import resolve
from funcstack.functions_host._cors import CorsPolicy, is_preflight
from funcstack.functions_host._functions import FunctionSpec
from funcstack.functions_host._host_endpoints import HostEndpoints
from funcstack.functions_host._http_server import (
    KestrelLimits,
    RequestBodyTimeoutError,
    head_received,
    read_body,
    reject_and_close,
    rejection,
    request_done,
)
from funcstack.functions_host._keys import HostKeys
from funcstack.functions_host._language_worker import LanguageWorker
from funcstack.functions_host._routing import RouteTable, RouteTemplateError
from funcstack.functions_host._rpc import protos
from funcstack.functions_host._sign_in import SignIn

logger = logging.getLogger("funcstack.functions_host.http")

_ALL_METHODS = None  # an HTTP trigger without ``methods`` accepts every method


def child_traceparent(incoming: str | None) -> str:
    """The invocation's W3C traceparent: a child of the caller's, or a new trace."""
    span_id = secrets.token_hex(8)
    parts = (incoming or "").strip().split("-")
    if (
        len(parts) >= 4
        and len(parts[1]) == 32
        and len(parts[2]) == 16
        and all(c in "0123456789abcdef" for c in parts[1] + parts[2])
        and parts[1] != "0" * 32
    ):
        return f"00-{parts[1]}-{span_id}-{parts[3][:2]}"
    return f"00-{secrets.token_hex(16)}-{span_id}-01"


class HttpHost:
    """Dispatches requests under the route prefix to HTTP-triggered functions."""

    def __init__(
        self,
        functions: list[FunctionSpec],
        route_prefix: str,
        worker: LanguageWorker,
        *,
        timeout: Callable[[], float | None] = lambda: None,
        limits: KestrelLimits | None = None,
        cors: CorsPolicy | None = None,
        keys: HostKeys | None = None,
        sign_in: SignIn | None = None,
        script_root: Path | None = None,
    ) -> None:
        self._worker = worker
        self._keys = keys
        self._sign_in = sign_in
        self._endpoints = HostEndpoints(script_root=script_root or Path.cwd(), keys=keys)
        self._timeout = timeout
        self._limits = limits or KestrelLimits()
        self._cors = cors
        prefix = route_prefix.strip("/")
        self._prefix = f"/{prefix}" if prefix else ""
        self._table: RouteTable[FunctionSpec] = RouteTable()
        #: each function's HTTP output (``$return`` or its own name; none: the host answers 200)
        self._http_outputs = {f.name: http_output_name(f.bindings) for f in functions}
        # The host maps the routes in the order of the functions' names (FunctionMetadataManager:
        # OrderBy(Name, StringComparer.OrdinalIgnoreCase)) and the first that matches wins.
        for spec in sorted(functions, key=lambda f: f.name.upper()):
            route = str(resolve(spec.trigger.get("route") or spec.name))
            check_route_template(spec.name, f"{prefix}/{route}" if prefix else route)
            methods = spec.trigger.get("methods")
            allowed = frozenset(str(m).upper() for m in methods) if methods else _ALL_METHODS
            self._table.add(route, allowed, spec)
            logger.info(
                "http function %s: %s %s/%s",
                spec.name,
                ",".join(sorted(allowed)) if allowed else "*",
                self._prefix,
                route.strip("/"),
            )

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        started = time.perf_counter()
        head_received(request)
        spec: FunctionSpec | None = None
        status = 500
        try:
            response, spec = await self._answer(request)
            status = response.status
            return response
        finally:
            request_done(request)
            logger.info(
                "http request method=%s path=%s function=%s status=%d ms=%.2f",
                request.method[:16],
                _shown_path(request.raw_path.split("?", 1)[0]),
                spec.name if spec else "-",
                status,
                (time.perf_counter() - started) * 1000.0,
            )

    async def _answer(self, request: web.BaseRequest) -> tuple[web.Response, FunctionSpec | None]:
        """Kestrel's checks, then CORS (before the host, as `func start` places it), then the
        host's routing."""
        over = self._limits.head_status(request)
        if over is not None:
            logger.info("request refused: %d request head over Kestrel's limits", over)
            return rejection(over), None
        if not _valid_header_text(request):
            # Kestrel decodes header values as UTF-8 and refuses anything else (or NUL) before
            # routing: 400, no body, connection closed ("Malformed request: invalid headers").
            return rejection(400), None
        if self._sign_in is not None:  # App Service Authentication runs before the host
            answered = await self._sign_in.answer(request)
            if answered is not None:
                return answered, None
            request = self._sign_in.admitted(request)
        cors = self._cors
        if cors is None or "Origin" not in request.headers:
            return await self._dispatch(request)
        if is_preflight(request):
            return cors.preflight(request), None
        response, spec = await self._dispatch(request)
        cors.apply(request, response)
        return response, spec

    async def _dispatch(self, request: web.BaseRequest) -> tuple[web.Response, FunctionSpec | None]:
        path = kestrel_path(request.raw_path)
        admin = self._endpoints.answer(request, path)
        if admin is not None:
            return admin, None
        whole = path
        prefix = self._prefix
        if prefix:
            n = len(prefix)
            if not (path.startswith(prefix) and (len(path) == n or path[n] == "/")):
                return self._not_found(whole), None
            path = path[len(prefix) :]
        method = request.method.upper()
        resolved = self._table.resolve(path.removeprefix("/"), method)
        if resolved is None:  # also when routes match the path but not the method: 404
            return self._not_found(whole), None
        spec, route_params = resolved
        if self._keys is not None and not self._keys.authorizes(
            spec.trigger.get("authLevel"), request
        ):
            return web.Response(status=401), spec  # UnauthorizedResult: no body
        length = request.content_length or 0
        if length > self._limits.max_body:
            return web.Response(status=413), spec
        try:
            body = await read_body(request, length, self._limits) if length > 0 else b""
        except RequestBodyTimeoutError as exc:
            reject_and_close(request.protocol, 408, f"request body too slow: {exc}")
            return rejection(408), spec
        except (web.RequestPayloadError, ConnectionError):
            logger.info("request refused: the client closed the connection during the body")
            return rejection(400), spec
        headers = request.headers
        rpc_http = to_rpc_http(request, route_params, body)
        pb = protos()
        try:
            answer = await self._worker.invoke(
                spec.function_id,
                [pb.ParameterBinding(name=spec.trigger_arg, data=pb.TypedData(http=rpc_http))],
                trace_parent=child_traceparent(headers.get("traceparent")),
                trace_state=headers.get("tracestate", ""),
                time_limit=self._timeout(),
                detail=f"{method} {_shown_path(request.raw_path.split('?', 1)[0])}",
            )
        except Exception:  # its Executed line says why (the language worker's)
            return web.Response(status=500), spec
        if answer.result.status != pb.StatusResult.Success:
            return web.Response(status=500), spec
        value = response_value(self._http_outputs.get(spec.name), answer)
        if value is None:  # no HTTP output set: the host's OkResult
            return web.Response(status=200), spec
        try:
            return from_rpc_result(value), spec
        except ValueError as exc:  # the host throws while writing the result: a 500
            logger.error("function %s: its answer cannot be written: %s", spec.name, exc)
            return web.Response(status=500), spec

    def _not_found(self, path: str) -> web.Response:
        """No function took the request: the landing page for ``/`` (``HomepageMiddleware``),
        else 404 with no body."""
        return self._endpoints.homepage() if path == "/" else web.Response(status=404)


def _shown_path(path: str) -> str:
    """A request's path for a log line: its first 200 characters."""
    return path if len(path) <= 200 else f"{path[:200]}...({len(path)} characters)"


def check_route_template(name: str, template: str) -> None:
    """Refuse what ASP.NET Core's ``RoutePatternParser`` refuses when the host maps a route
    (``WebJobsRouteBuilder``: ``routePrefix + '/' + route``, one leading ``/`` or ``~/`` trimmed):
    two consecutive separators. The Azure host does not start then; e.g. AsgiFunctionApp's
    ``/{*route}`` under the default prefix is ``api//{*route}``."""
    trimmed = template[2:] if template.startswith("~/") else template.removeprefix("/")
    if "//" in trimmed:
        raise RouteTemplateError(
            "A host error has occurred during startup operation: Microsoft.AspNetCore.Routing: "
            f"An error occurred while creating the route with name '{name}' and template "
            f"'{template}'. Microsoft.AspNetCore.Routing: The route template separator "
            "character '/' cannot appear consecutively. It must be separated by either a "
            "parameter or a literal value. (Parameter 'routeTemplate')"
        )


_ENCODED_SLASH = re.compile(r"(%2[fF])")


def kestrel_path(target: str) -> str:
    """The path as Kestrel gives it to routing: percent-escapes decoded as UTF-8 except
    ``%2F`` (kept as the three characters, inside its segment), dot segments removed. A path
    whose escapes are not UTF-8 is left as sent."""
    raw = target.split("?", 1)[0]
    pieces = _ENCODED_SLASH.split(raw)
    try:
        path = "".join(
            piece if i % 2 else unquote_to_bytes(piece).decode("utf-8")
            for i, piece in enumerate(pieces)
        )
    except UnicodeDecodeError:
        path = raw
    out: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                out.append("")
        elif segment == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(segment)
    return "/".join(out) or "/"


# PathString's valid path characters (RFC 3986 pchar and "/"): ToUriComponent escapes the rest.
_PATH_CHARS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/"
)
_HEX = frozenset("0123456789abcdefABCDEF")


def path_uri_component(path: str) -> str:
    """``PathString.ToUriComponent()``: characters that are not valid in a path escaped as
    ``Uri.EscapeDataString`` does (UTF-8, upper-case hex); an existing ``%XX`` kept as it is."""
    out: list[str] = []
    i = 0
    while i < len(path):
        ch = path[i]
        if ch == "%" and i + 2 < len(path) and path[i + 1] in _HEX and path[i + 2] in _HEX:
            out.append(path[i : i + 3])
            i += 3
            continue
        if ch in _PATH_CHARS:
            out.append(ch)
        else:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogateescape")))
        i += 1
    return "".join(out)


def rpc_url(request: web.BaseRequest) -> str:
    """``RpcHttp.url`` as the host builds it:
    ``$"{scheme}://{request.Host}{request.Path}{request.QueryString}"`` -- the path as Kestrel
    decoded it (``kestrel_path``), escaped again by ``PathString``; the query string as sent."""
    path, mark, query = request.raw_path.partition("?")
    return (
        f"http://{request.headers.get('Host', '')}{path_uri_component(kestrel_path(path))}"
        f"{mark}{query}"
    )


def _valid_header_text(request: web.BaseRequest) -> bool:
    """aiohttp decodes header bytes as UTF-8 with surrogateescape: a surrogate marks bytes
    that are not UTF-8."""
    for key, value in request.headers.items():
        for text in (key, value):
            if "\x00" in text or any("\ud800" <= ch <= "\udfff" for ch in text):
                return False
    return True


def to_rpc_http(request: web.BaseRequest, route_params: dict[str, str], body: bytes) -> Any:
    """The host's ``RpcHttp`` for ``request``."""
    pb = protos()
    headers: dict[str, str] = {}
    for key, value in request.headers.items():
        lower = key.lower()
        headers[lower] = f"{headers[lower]},{value}" if lower in headers else value
    query: dict[str, list[str]] = {}
    for key, value in request.query.items():
        query.setdefault(key, []).append(value)
    http = pb.RpcHttp(
        method=request.method.upper(),
        url=rpc_url(request),
        headers=headers,
        query={k: ",".join(v) for k, v in query.items() if ",".join(v)},
        params={k: v for k, v in route_params.items() if v is not None},
    )
    if body:
        http.body.CopyFrom(pb.TypedData(bytes=body))
    return http


def from_rpc_result(value: Any) -> web.Response:
    """The HTTP response for the function's return value, as ``RawScriptResult`` writes it:
    text (a ``str`` the function returned) through ASP.NET Core's ``StringOutputFormatter``,
    ``text/plain; charset=utf-8``; bytes through its ``ByteArrayOutputFormatter``,
    ``application/octet-stream``."""
    kind = value.WhichOneof("data")
    if kind != "http":
        content = _typed_bytes(value)
        if kind in {"string", "json"}:
            return web.Response(
                status=200, body=content, content_type="text/plain", charset="utf-8"
            )
        return web.Response(status=200, body=content, content_type="application/octet-stream")
    http = value.http
    status = int(http.status_code) if http.status_code.strip() else 200
    headers: CIMultiDict[str] = CIMultiDict()
    for key, header_value in http.headers.items():
        if key not in headers:  # a later name that differs only in case is dropped (and logged)
            headers.add(key, header_value)
    for cookie in http.cookies:
        headers.add("Set-Cookie", set_cookie_header(cookie))
    return web.Response(status=status, body=_typed_bytes(http.body), headers=headers)


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_SAME_SITE = {1: "lax", 2: "strict", 3: "none"}  # RpcHttpCookie.SameSite: None (0) is unset


def set_cookie_header(cookie: Any) -> str:
    """One ``RpcHttpCookie`` as the host writes it: ``response.Cookies.Append(name, value,
    options)`` (``GrpcMessageExtensionUtilities.RpcHttpCookieConverter``), i.e. ASP.NET Core's
    ``SetCookieHeaderValue``: ``name=<Uri.EscapeDataString(value)>``, then ``expires`` (RFC
    1123), ``max-age`` (whole seconds), ``domain`` (when sent, even empty), ``path`` (``/``
    when not sent), ``secure``, ``samesite``, ``httponly``. A name that is not a token, or a
    negative max-age, makes the host throw: ``ValueError`` (a 500)."""
    name = str(cookie.name)
    if not _TOKEN.fullmatch(name):
        raise ValueError(f"invalid cookie name {name!r}")
    parts = [f"{name}={quote(str(cookie.value), safe='')}"]
    if cookie.HasField("expires"):
        moment = dt.datetime.fromtimestamp(cookie.expires.value.seconds, dt.UTC)
        parts.append(f"expires={email.utils.format_datetime(moment, usegmt=True)}")
    if cookie.HasField("max_age"):
        seconds = float(cookie.max_age.value)
        if not math.isfinite(seconds) or seconds <= -1:
            raise ValueError(f"cookie {name}: max-age {seconds} is not a non-negative number")
        parts.append(f"max-age={int(seconds)}")
    if cookie.HasField("domain"):
        parts.append(f"domain={cookie.domain.value}")
    parts.append(f"path={cookie.path.value if cookie.HasField('path') else '/'}")
    if cookie.HasField("secure") and cookie.secure.value:
        parts.append("secure")
    same_site = _SAME_SITE.get(int(cookie.same_site))
    if same_site is not None:
        parts.append(f"samesite={same_site}")
    if cookie.HasField("http_only") and cookie.http_only.value:
        parts.append("httponly")
    return "; ".join(parts)


def _typed_bytes(value: Any) -> bytes:
    kind = value.WhichOneof("data")
    if kind == "bytes":
        return bytes(value.bytes)
    if kind == "stream":
        return bytes(value.stream)
    if kind in {"string", "json"}:
        return str(getattr(value, kind)).encode("utf-8")
    if kind in {"int", "double"}:
        return str(getattr(value, kind)).encode("utf-8")
    return b""
