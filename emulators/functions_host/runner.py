"""The runner: hosts a v2-programming-model Functions app without Core Tools."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from aiohttp import web

from emulators.functions_host.app import FunctionSpec, import_app, index_functions
from emulators.functions_host.config import HostJson, apply_settings, load_local_settings
from emulators.functions_host.cosmos_trigger import CosmosTriggerListener
from emulators.functions_host.http_host import HttpHost

logger = logging.getLogger("emulators.functions_host")

_MAX_BODY = 100 * 1024 * 1024  # the Functions host's request size limit


class Runner:
    """Loads the app once and serves it.

    Use ``await start_async()`` / ``await stop_async()`` inside an event loop, or
    ``start()`` / ``stop()`` to run it on a background thread. Settings go into
    ``os.environ`` of THIS process before the app is imported (as the host does).
    """

    def __init__(
        self,
        app_dir: str | Path,
        settings: Mapping[str, str] | None = None,
        *,
        script: str = "function_app.py",
        settings_file: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.app_dir = Path(app_dir).resolve()
        self.script = script
        self.settings = dict(settings or {})
        self.settings_file = Path(settings_file) if settings_file else None
        if self.settings_file is not None and not self.settings_file.is_absolute():
            self.settings_file = self.app_dir / self.settings_file
        self.host = host
        self.port = port
        self.functions: list[FunctionSpec] = []
        self._executor: ThreadPoolExecutor | None = None
        self._site_runner: web.ServerRunner | None = None
        self._listeners: list[CosmosTriggerListener] = []
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._host_json = HostJson()

    @property
    def url(self) -> str:
        prefix = self._host_json.route_prefix
        base = f"http://{self.host}:{self.port}"
        return f"{base}/{prefix}" if prefix else base

    def load(self) -> list[FunctionSpec]:
        """Apply settings, import the app, index it (``get_functions()`` once)."""
        file_values = load_local_settings(self.settings_file) if self.settings_file else {}
        apply_settings(file_values, self.settings)
        self._host_json = HostJson.load(self.app_dir)
        app = import_app(self.app_dir, self.script)
        self.functions = index_functions(app, self._host_json)
        return self.functions

    async def start_async(self) -> None:
        if not self.functions:
            self.load()
        threads = os.environ.get("PYTHON_THREADPOOL_THREAD_COUNT")
        self._executor = ThreadPoolExecutor(
            max_workers=int(threads) if threads else None, thread_name_prefix="function"
        )
        http_specs = [f for f in self.functions if f.trigger_type == "httpTrigger"]
        cosmos_specs = [f for f in self.functions if f.trigger_type == "cosmosDBTrigger"]
        for spec in self.functions:
            if spec not in http_specs and spec not in cosmos_specs:
                logger.warning("function %s: trigger %s not supported; skipped",
                               spec.name, spec.trigger_type)
        http_host = HttpHost(
            http_specs, self._host_json.route_prefix, self._executor, max_body=_MAX_BODY
        )
        server = web.Server(http_host.handle, access_log=None)
        self._site_runner = web.ServerRunner(server, handle_signals=False)
        await self._site_runner.setup()
        site = web.TCPSite(self._site_runner, self.host, self.port, reuse_address=True)
        await site.start()
        sockets = self._site_runner.addresses
        if sockets:
            self.port = int(sockets[0][1])
        for spec in cosmos_specs:
            listener = CosmosTriggerListener(spec, self._executor)
            listener.start()
            self._listeners.append(listener)
        logger.info("runner listening on %s (%d function(s))", self.url, len(self.functions))

    async def stop_async(self) -> None:
        """Stop accepting HTTP, cancel the poll loops, close clients, drain the pool."""
        if self._site_runner is not None:
            await self._site_runner.cleanup()
            self._site_runner = None
        for listener in self._listeners:
            await listener.stop()
        self._listeners.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        logger.info("runner stopped")

    async def serve_until(self, stop: asyncio.Event) -> None:
        await self.start_async()
        try:
            await stop.wait()
        finally:
            await self.stop_async()

    # -- background-thread API ------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> Runner:
        """Run on a background thread; return once HTTP is listening."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def _main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            self._stop_event = asyncio.Event()
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_until_complete(self._stop_event.wait())
            finally:
                loop.run_until_complete(self.stop_async())
                loop.close()

        self._thread = threading.Thread(target=_main, name="functions-runner", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise TimeoutError("runner did not start in time")
        if failure:
            raise failure[0]
        return self

    def stop(self, timeout: float = 30.0) -> None:
        loop, event, thread = self._loop, self._stop_event, self._thread
        if loop is None or event is None or thread is None:
            return
        if not loop.is_closed():
            loop.call_soon_threadsafe(event.set)
        thread.join(timeout)
        self._thread = None
