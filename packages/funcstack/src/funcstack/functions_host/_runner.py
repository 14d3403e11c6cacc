"""The local Functions host: serves a v2-programming-model app without Core Tools.

It does the host's jobs -- settings, HTTP listening and the ``RpcHttp`` mapping, the Cosmos DB,
timer, Service Bus and Storage queue triggers, retry policies, the function timeout,
``AzureWebJobs.<fn>.Disabled`` --
and leaves indexing, binding conversion and invocation to the real worker library
(``azure_functions_runtime``) in a worker process, driven with the Functions RPC messages.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path

from aiohttp import web

from funcstack.functions_host._config import HostJson, apply_settings, load_local_settings
from funcstack.functions_host._cors import CorsPolicy, load_cors
from funcstack.functions_host._cosmos_trigger import CosmosTriggerListener
from funcstack.functions_host._functions import FunctionSpec, specs_from_metadata
from funcstack.functions_host._http_host import HttpHost
from funcstack.functions_host._http_server import HttpServer, KestrelLimits
from funcstack.functions_host._keys import FUNCTION_KEY_SETTING, MASTER_KEY_SETTING, HostKeys
from funcstack.functions_host._language_worker import LanguageWorker
from funcstack.functions_host._python_version import python_version_notice
from funcstack.functions_host._queue_trigger import QueueTriggerListener
from funcstack.functions_host._servicebus_trigger import ServiceBusTriggerListener
from funcstack.functions_host._timer_trigger import TimerListener

logger = logging.getLogger("funcstack.functions_host")


class Runner:
    """Starts the language worker, which indexes the app, and serves the app's functions.

    Use ``await start_async()`` / ``await stop_async()`` inside an event loop, or
    ``start()`` / ``stop()`` to run it on a background thread. Settings go into
    ``os.environ`` of THIS process (binding expressions resolve against them) and become the
    worker's environment, as the host does.

    ``enforce_keys``: HTTP functions require keys by their auth level, as in Azure (``keys``:
    the settings' ``FUNCTIONS_HOST_FUNCTION_KEY``/``FUNCTIONS_HOST_MASTER_KEY``, else new
    ones); by default no key is checked, as with ``func start``.
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
        python: str | None = None,
        enforce_keys: bool = False,
    ) -> None:
        self.app_dir = Path(app_dir).resolve()
        self.enforce_keys = enforce_keys
        #: The keys HTTP functions require (None: none checked, as with ``func start``).
        self.keys: HostKeys | None = None
        self.python = python
        self.script = script
        self.settings = dict(settings or {})
        self.settings_file = Path(settings_file) if settings_file else None
        if self.settings_file is not None and not self.settings_file.is_absolute():
            self.settings_file = self.app_dir / self.settings_file
        self.host = host
        self.port = port
        self.functions: list[FunctionSpec] = []
        self.worker: LanguageWorker | None = None
        self._site_runner: web.ServerRunner | None = None
        self._listeners: list[CosmosTriggerListener | TimerListener | ServiceBusTriggerListener
                              | QueueTriggerListener]
        self._listeners = []
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._host_json = HostJson()
        self._cors: CorsPolicy | None = None

    @property
    def url(self) -> str:
        prefix = self._host_json.route_prefix
        base = f"http://{self.host}:{self.port}"
        return f"{base}/{prefix}" if prefix else base

    async def load(self) -> list[FunctionSpec]:
        """Apply settings, start the worker (it indexes the app), keep the functions' specs."""
        file_values = load_local_settings(self.settings_file) if self.settings_file else {}
        apply_settings(file_values, self.settings)
        self._host_json = HostJson.load(self.app_dir)
        notice = python_version_notice(self.app_dir, self.python)
        if notice is not None:
            logger.warning("%s", notice)
        # func start reads the `Host` section of the same file (CORS, CORSCredentials)
        self._cors = load_cors(self.settings_file)
        if self.enforce_keys:
            self.keys = HostKeys.from_settings()
        # the worker's environment only: this process may host other apps (tests do); the
        # keys are the host's (in Azure the app's environment holds none)
        environment = {k: v for k, v in os.environ.items()
                       if k not in {FUNCTION_KEY_SETTING, MASTER_KEY_SETTING}}
        environment["PYTHON_SCRIPT_FILE_NAME"] = self.script
        self.worker = LanguageWorker(self.app_dir, environment, python=self.python)
        metadata = await self.worker.start()
        self.functions = specs_from_metadata(metadata, self._host_json)
        return self.functions

    def _function_timeout(self) -> float | None:
        return self._host_json.function_timeout

    async def start_async(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self.stop_async()
            raise

    async def _start(self) -> None:
        if self.worker is None:
            await self.load()
        worker = self.worker
        assert worker is not None
        by_type: dict[str, list[FunctionSpec]] = {}
        for spec in self.functions:
            by_type.setdefault(spec.trigger_type, []).append(spec)
        for kind, specs in by_type.items():
            if kind not in {"httpTrigger", "cosmosDBTrigger", "timerTrigger", "serviceBusTrigger",
                            "queueTrigger"}:
                for spec in specs:
                    logger.warning("function %s: trigger %s not supported", spec.name, kind)
        limits = KestrelLimits.from_settings()
        http_host = HttpHost(
            by_type.get("httpTrigger", []),
            self._host_json.route_prefix,
            worker,
            timeout=self._function_timeout,
            limits=limits,
            cors=self._cors,
            keys=self.keys,
        )
        if self.keys is not None:
            logger.info("keys: enforced by auth level (function key and master key)")
        if self._cors is not None:
            logger.info("CORS: origins %s, credentials %s", ",".join(self._cors.origins),
                        self._cors.credentials)
        server = HttpServer(http_host.handle, limits=limits, access_log=None)
        # In-flight requests get half a second at a stop: a stack stops each part within 1.5 s.
        self._site_runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=0.5)
        await self._site_runner.setup()
        site = web.TCPSite(self._site_runner, self.host, self.port, reuse_address=True)
        await site.start()
        sockets = self._site_runner.addresses
        if sockets:
            self.port = int(sockets[0][1])
        for spec in by_type.get("cosmosDBTrigger", []):
            cosmos = CosmosTriggerListener(spec, worker, timeout=self._function_timeout)
            cosmos.start()
            self._listeners.append(cosmos)
        for spec in by_type.get("timerTrigger", []):
            timer = TimerListener(spec, worker, timeout=self._function_timeout)
            timer.start()
            self._listeners.append(timer)
        for spec in by_type.get("serviceBusTrigger", []):
            servicebus = ServiceBusTriggerListener(
                spec,
                worker,
                host_options=self._host_json.service_bus,
                timeout=self._function_timeout,
            )
            servicebus.start()
            self._listeners.append(servicebus)
        for spec in by_type.get("queueTrigger", []):
            queue = QueueTriggerListener(
                spec, worker, host_options=self._host_json.queues, timeout=self._function_timeout
            )
            queue.start()
            self._listeners.append(queue)
        logger.info("host listening on %s (%d function(s))", self.url, len(self.functions))

    async def stop_async(self) -> None:
        """Stop accepting HTTP, cancel the trigger loops, stop the worker."""
        if self._site_runner is not None:
            await self._site_runner.cleanup()
            self._site_runner = None
        for listener in self._listeners:
            await listener.stop()
        self._listeners.clear()
        if self.worker is not None:
            await self.worker.stop()
            self.worker = None
        logger.info("host stopped")

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
