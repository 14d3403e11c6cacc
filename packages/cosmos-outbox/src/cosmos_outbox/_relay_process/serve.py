"""A relay process, run until it is told to stop: `run_relay` starts a `RelayProcessor`, serves
its probes over HTTP and stops it on SIGTERM or SIGINT (its leases released: another instance
takes them at its next acquire round, where a killed process's wait for their expiry).

The probes (JSON; anonymous, for the platform's probes: bind them where only it reaches them,
`host`):

- `GET /live`: 200 while the process's event loop answers (a liveness probe: restart when not);
- `GET /ready`: 200 once it is configured (its settings read, its lease store initialised, its
  topic and claim-check container found) and listening (its leases' start fixed: a change made
  now is relayed), else 503 with what it waits for -- ready means listening;
- `GET /health`: 200 while it moves: every lease it holds with pending changes has moved within
  `stall_after` seconds (`ProcessState.stalls`), else 503 naming each stalled lease, since when
  and why (its last error); 503 too while it is not ready. The body is the relay's state
  (`ProcessState.as_json`: per lease its owner, continuation, when it last moved, its last error,
  the estimator's lag)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from cosmos_outbox._relay_process.runner import RelayProcessor

logger = logging.getLogger("cosmos_outbox.relay")


def probe_app(relay: RelayProcessor) -> Any:
    """The probes' aiohttp application (see the module)."""
    from aiohttp import web

    async def live(_request: web.Request) -> web.Response:
        return web.json_response({"status": "live", "instance": relay.instance_name})

    async def ready(_request: web.Request) -> web.Response:
        state = relay.state()
        body = state.as_json()
        body["status"] = "ready" if state.ready else "not ready"
        return web.json_response(body, status=200 if state.ready else 503)

    async def health(_request: web.Request) -> web.Response:
        state = relay.state()
        body = state.as_json()
        if not state.ready:
            body["status"] = "not ready"
            return web.json_response(body, status=503)
        stalls = state.stalls(relay.stall_after, dt.datetime.now(dt.UTC))
        body["status"] = "stalled" if stalls else "healthy"
        body["stalled"] = [
            {"lease": s.lease_token, "since": s.since.isoformat(), "reason": s.reason}
            for s in stalls
        ]
        body["stallAfterSeconds"] = relay.stall_after
        return web.json_response(body, status=503 if stalls else 200)

    app = web.Application()
    app.router.add_get("/live", live)
    app.router.add_get("/ready", ready)
    app.router.add_get("/health", health)
    return app


async def serve(
    relay: RelayProcessor,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    stopping: asyncio.Event | None = None,
    on_listening: Callable[[str], Awaitable[None] | None] | None = None,
) -> None:
    """Start `relay` and its probes on `host`:`port` (0: a free port), run until `stopping` is
    set (or SIGTERM / SIGINT, when this runs on the main thread), then stop it."""
    from aiohttp import web

    stop = stopping if stopping is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    handled = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, _stop_on(stop, sig))
            handled.append(sig)
    runner = web.AppRunner(probe_app(relay), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = next((a[1] for a in runner.addresses if isinstance(a, tuple)), port)
        url = f"http://{host}:{bound}"
        logger.info(
            "relay process %s: probes on %s (/live, /ready, /health)", relay.instance_name, url
        )
        if on_listening is not None:
            outcome = on_listening(url)
            if outcome is not None:
                await outcome
        await relay.start()
        try:
            await stop.wait()
        finally:
            logger.info("relay process %s: stopping (its leases released)", relay.instance_name)
            await relay.stop()
    finally:
        await runner.cleanup()
        for sig in handled:
            loop.remove_signal_handler(sig)


def _stop_on(stop: asyncio.Event, sig: signal.Signals) -> Callable[[], None]:
    def handler() -> None:
        logger.info("relay process: %s received", sig.name)
        stop.set()

    return handler


def run_relay(
    relay: RelayProcessor | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
) -> None:
    """Run a relay process until SIGTERM or SIGINT (see the module): `relay` (default: one from
    the environment's settings) and its probes on `host`:`port`."""
    asyncio.run(serve(relay if relay is not None else RelayProcessor(), host=host, port=port))
