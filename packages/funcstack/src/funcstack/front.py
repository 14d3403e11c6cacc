"""The front of an app on several host instances: one address (the app's port) that hands each
HTTP request to the next instance of its HTTP group, as Azure's front ends spread an app's
requests over its instances.

Follows what Azure documents of its front end for Functions and App Service ("Azure App Service
Local Cache / Architecture": the front ends, ARR, load-balance each request across the
instances; an app's host name answers for all of them): **per request**, not per connection,
so two requests on one kept-alive connection may reach two instances; the request goes through
as sent (method, path, query, headers with its ``Host``, body streamed with its
``Content-Length``), and the answer comes back as the instance wrote it (status, headers,
body streamed). Instances whose process has exited are skipped; with none left the front
answers **503**. An instance that refuses the connection (its process dying, not yet seen as
exited) gets the request no further: it goes to the next instance, as it never reached this
one; an answer cut short is not retried. A paused instance keeps its turn (its requests wait,
as they would on a hung instance in Azure until its health check took it out).

LOCAL DIFFERENCE: round robin, no affinity cookie (``ARRAffinity``: Functions apps have
``clientAffinityEnabled`` off), no health checks, no ``X-Forwarded-*`` / ``X-ARR-*`` headers
added; the hop-by-hop headers (``Connection``, ``Keep-Alive``, ``Transfer-Encoding``, ...) are
the front's own on each side.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections.abc import Callable

import aiohttp
from aiohttp import web

__all__ = ["HttpFront"]

logger = logging.getLogger("funcstack.front")

#: RFC 9110 7.6.1's hop-by-hop headers, and the body framing each side sets for itself.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
#: Generous parser limits: the instances enforce Kestrel's (414, 431), not the front.
_PARSER_LIMITS = {"max_line_size": 1 << 20, "max_field_size": 1 << 20, "max_headers": 10_000}


class HttpFront:
    """Listens on ``host:port`` (0: a free port) and forwards each request to one of
    ``backends()`` (base URLs such as ``http://127.0.0.1:7301``), in turn."""

    def __init__(
        self, backends: Callable[[], list[str]], *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self._backends = backends
        self.host = host
        self.port = port
        self._turn = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None
        self._session: aiohttp.ClientSession | None = None
        #: Requests forwarded, by backend (for tests and the banner).
        self.forwarded: dict[str, int] = {}

    def start(self, timeout: float = 10.0) -> HttpFront:
        """Listen (on a thread of its own); return once bound. ``OSError`` when the port is
        taken."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve(ready))
            except BaseException as exc:
                failure.append(exc)
                ready.set()
            finally:
                loop.close()

        self._thread = threading.Thread(target=main, name=f"front-{self.port}", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise TimeoutError("the HTTP front did not start in time")
        if failure:
            raise failure[0]
        return self

    def stop(self, timeout: float = 5.0) -> None:
        loop, stopped, thread = self._loop, self._stopped, self._thread
        if loop is not None and stopped is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stopped.set)
        if thread is not None:
            thread.join(timeout)
        self._thread = None

    async def _serve(self, ready: threading.Event) -> None:
        self._stopped = asyncio.Event()
        self._session = aiohttp.ClientSession(
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None),
            connector=aiohttp.TCPConnector(limit=0, force_close=False),
        )
        server = web.Server(self._handle, **_PARSER_LIMITS)  # type: ignore[arg-type]
        runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=0.5)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
            await site.start()
            if runner.addresses:
                self.port = int(runner.addresses[0][1])
            ready.set()
            await self._stopped.wait()
        finally:
            await runner.cleanup()
            await self._session.close()

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        backends = self._backends()
        if not backends:
            return web.Response(status=503, text="no instance of the app is running\n")
        first = next(self._turn)
        for attempt in range(len(backends)):
            target = backends[(first + attempt) % len(backends)]
            try:
                return await self._forward(request, target)
            except aiohttp.ClientConnectorError as exc:  # refused: the request never left
                logger.warning("front: %s refused the connection (%s)", target, exc)
        return web.Response(status=502, text="no instance took the connection\n")

    async def _forward(self, request: web.BaseRequest, target: str) -> web.StreamResponse:
        """Hand ``request`` to ``target``; ``aiohttp.ClientConnectorError`` when it refuses the
        connection (nothing was sent)."""
        self.forwarded[target] = self.forwarded.get(target, 0) + 1
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP]
        has_body = request.body_exists
        assert self._session is not None
        out: web.StreamResponse | None = None
        try:
            async with self._session.request(
                request.method,
                target + request.rel_url.raw_path_qs,
                headers=headers,
                data=request.content if has_body else None,
                allow_redirects=False,
                skip_auto_headers={"User-Agent", "Accept", "Accept-Encoding", "Content-Type"},
            ) as answer:
                out = web.StreamResponse(status=answer.status, reason=answer.reason)
                for name, value in answer.headers.items():
                    if name.lower() not in _HOP_BY_HOP:
                        out.headers.add(name, value)
                await out.prepare(request)
                async for chunk in answer.content.iter_any():
                    await out.write(chunk)
                await out.write_eof()
                return out
        except aiohttp.ClientConnectorError:
            raise
        except aiohttp.ClientError as exc:
            logger.warning(
                "front: %s %s to %s failed: %s", request.method, request.path, target, exc
            )
            if out is not None and out.prepared:
                return out  # the answer had begun: its connection ends here
            return web.Response(status=502, text="the instance did not answer\n")
