"""The HTTP server in front of the local host, with the limits Kestrel enforces for the Functions
host before any routing.

The Functions host (`Program.cs`) changes one Kestrel limit, `MaxRequestBodySize` (100 MB); the
others keep Kestrel's defaults, which are the figures here:

* request line (method, target, version, CRLF) at most `MaxRequestLineSize` 8192 bytes, else
  **414 URI Too Long**;
* request headers at most `MaxRequestHeadersTotalSize` 32768 bytes (header lines with their
  CRLFs) and `MaxRequestHeaderCount` 100, else **431 Request Header Fields Too Large**;
* any other malformed request head: **400**;
* the head must arrive within `RequestHeadersTimeout` 30 s of the connection (or of the first
  byte of a later request on a kept-alive connection): else **408 Request Timeout** when part of
  it came, a plain close when nothing did; an idle kept-alive connection closes after
  `KeepAliveTimeout` 130 s;
* the body must come at `MinRequestBodyDataRate` 240 bytes/s on average once a 5 s grace period
  has passed, else **408** (`read_body`).

Kestrel's rejections have no body and close the connection; so do these, and each writes one
log line, never the request and never a traceback. Azure's front ends may refuse a request
before the host does (they have limits of their own); these are the host's.

The timeouts can be shortened for tests with settings that only the local host reads (Azure has
no such settings): `LOCAL_HOST_REQUEST_HEADERS_TIMEOUT_SECONDS`,
`LOCAL_HOST_MIN_REQUEST_BODY_DATA_RATE` (bytes/s) and
`LOCAL_HOST_MIN_REQUEST_BODY_GRACE_SECONDS`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong

logger = logging.getLogger("funcstack.functions_host.http")

HEADERS_TIMEOUT_SETTING = "LOCAL_HOST_REQUEST_HEADERS_TIMEOUT_SECONDS"
BODY_RATE_SETTING = "LOCAL_HOST_MIN_REQUEST_BODY_DATA_RATE"
BODY_GRACE_SETTING = "LOCAL_HOST_MIN_REQUEST_BODY_GRACE_SECONDS"


@dataclass(frozen=True)
class KestrelLimits:
    """Kestrel's defaults, which the Functions host keeps (it sets only the body size)."""

    max_request_line: int = 8192
    max_headers_total: int = 32 * 1024
    max_header_count: int = 100
    request_headers_timeout: float = 30.0
    keep_alive_timeout: float = 130.0
    min_body_rate: float = 240.0
    min_body_grace: float = 5.0
    max_body: int = 100 * 1024 * 1024

    @classmethod
    def from_settings(cls, environ: Mapping[str, str] | None = None) -> KestrelLimits:
        """The defaults, with the local-only timeout settings applied."""
        env = os.environ if environ is None else environ
        defaults = cls()

        def number(name: str, default: float) -> float:
            raw = env.get(name, "").strip()
            if not raw:
                return default
            value = float(raw)
            if value <= 0:
                raise ValueError(f"{name} must be above 0, got {raw!r}")
            return value

        return cls(
            request_headers_timeout=number(
                HEADERS_TIMEOUT_SETTING, defaults.request_headers_timeout
            ),
            min_body_rate=number(BODY_RATE_SETTING, defaults.min_body_rate),
            min_body_grace=number(BODY_GRACE_SETTING, defaults.min_body_grace),
        )

    def head_status(self, request: web.BaseRequest) -> int | None:
        """414 or 431 when the parsed request head is over Kestrel's limits, else None."""
        version = f"HTTP/{request.version.major}.{request.version.minor}"
        line = len(request.method) + 1 + len(request.raw_path.encode()) + 1 + len(version) + 2
        if line > self.max_request_line:
            return 414
        total = sum(len(name) + 2 + len(value) + 2 for name, value in request.raw_headers)
        if len(request.raw_headers) > self.max_header_count or total + 2 > self.max_headers_total:
            return 431
        return None


class RequestBodyTimeoutError(Exception):
    """The body did not arrive at the minimum data rate."""


async def read_body(request: web.BaseRequest, length: int, limits: KestrelLimits) -> bytes:
    """`length` bytes of body, arriving at `min_body_rate` on average after the grace period
    (Kestrel's `MinRequestBodyDataRate`), else `RequestBodyTimeoutError`."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    chunks: list[bytes] = []
    received = 0
    while received < length:
        deadline = started + max(limits.min_body_grace, received / limits.min_body_rate)
        try:
            chunk = await asyncio.wait_for(request.content.readany(), deadline - loop.time())
        except TimeoutError:
            raise RequestBodyTimeoutError(
                f"{received} of {length} bytes after {loop.time() - started:.1f} s"
            ) from None
        if not chunk:
            break
        chunks.append(chunk)
        received += len(chunk)
    return b"".join(chunks)


def reject_and_close(protocol: Any, status: int, reason: str) -> None:
    """Write Kestrel's bodyless rejection straight to the connection and close it."""
    transport = getattr(protocol, "transport", None)
    logger.info("request refused: %d %s", status, reason)
    if transport is None or transport.is_closing():
        return
    phrase = HTTPStatus(status).phrase
    head = (
        f"HTTP/1.1 {status} {phrase}\r\nContent-Length: 0\r\nConnection: close\r\n"
        f"Date: {formatdate(usegmt=True)}\r\n\r\n"
    )
    transport.write(head.encode("ascii"))
    protocol.force_close()


def rejection(status: int) -> web.Response:
    """A bodyless answer that closes the connection (Kestrel's `BadHttpRequestException`)."""
    response = web.Response(status=status, headers={"Connection": "close"})
    response.force_close()
    return response


class _Connection(web.RequestHandler):
    """One client connection: aiohttp's protocol with Kestrel's answers to malformed heads and
    its request-headers timeout."""

    def __init__(self, manager: web.Server, *, limits: KestrelLimits, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._limits = limits
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._awaiting_head = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        if self._awaiting_head:
            self._head_bytes += len(data)
            if self._head_timer is None:
                self._arm_head_timer()
        super().data_received(data)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def head_received(self) -> None:
        """The request head is in: stop its timer."""
        self._cancel_head_timer()
        self._awaiting_head = False

    def request_done(self) -> None:
        """Answered: the next request's head is awaited (the keep-alive timeout applies until
        its first byte)."""
        self._awaiting_head = True
        self._head_bytes = 0

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        loop = asyncio.get_running_loop()
        self._head_timer = loop.call_later(
            self._limits.request_headers_timeout, self._head_timed_out
        )

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._awaiting_head:
            return
        timeout = self._limits.request_headers_timeout
        if self._head_bytes:
            reject_and_close(self, 408, f"request headers not received within {timeout:g} s")
        else:
            self.force_close()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if not isinstance(exc, HttpProcessingError):
            return super().handle_error(request, status, exc, message)
        answer, reason = self._classify(exc)
        logger.info("request refused: %d %s", answer, reason)
        return rejection(answer)

    def _classify(self, exc: HttpProcessingError) -> tuple[int, str]:
        limits = self._limits
        if isinstance(exc, LineTooLong) and len(exc.args) > 1:
            if str(exc.args[1]) == str(limits.max_request_line):
                return 414, f"request line over {limits.max_request_line} bytes"
            return 431, f"request headers over {limits.max_headers_total} bytes"
        if "too many headers" in str(exc).lower():
            return 431, f"more than {limits.max_header_count} request headers"
        return 400, f"malformed request ({type(exc).__name__})"


class HttpServer(web.Server):
    """aiohttp's low-level server, its connections held to `KestrelLimits`."""

    def __init__(self, handler: Any, *, limits: KestrelLimits, **kwargs: Any) -> None:
        self._connection_kwargs = {
            "max_line_size": limits.max_request_line,
            "max_field_size": limits.max_headers_total,
            "max_headers": limits.max_header_count,
            "keepalive_timeout": limits.keep_alive_timeout,
            **{
                k: v
                for k, v in kwargs.items()
                if k not in {"loop", "request_factory", "handler_cancellation"}
            },
        }
        super().__init__(handler, **kwargs)
        self.limits = limits

    def __call__(self) -> web.RequestHandler:
        return _Connection(
            self, limits=self.limits, loop=asyncio.get_running_loop(), **self._connection_kwargs
        )


def head_received(request: web.BaseRequest) -> None:
    """Tell the connection its request head arrived (stops the request-headers timeout)."""
    protocol = request.protocol
    if isinstance(protocol, _Connection):
        protocol.head_received()


def request_done(request: web.BaseRequest) -> None:
    protocol = request.protocol
    if isinstance(protocol, _Connection):
        protocol.request_done()
