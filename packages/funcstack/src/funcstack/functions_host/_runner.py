"""The local Functions host: serves a v2-programming-model app without Core Tools.

It does the host's jobs -- settings, HTTP listening and the ``RpcHttp`` mapping, the Cosmos DB,
timer, Service Bus, Storage queue and blob triggers, the input and output bindings
(``_bindings``), retry policies, the function timeout, ``AzureWebJobs.<fn>.Disabled`` --
and leaves indexing, binding conversion and invocation to the real worker library
(``azure_functions_runtime``) in a worker process, driven with the Functions RPC messages.

Every trigger but HTTP is served by a listener (``_listener.Listener``: ``start()``, ``await
wait_listening()``, ``await stop()``), made from the table ``TRIGGERS`` by trigger type, as the
WebJobs host makes an ``IListener`` per function from its binding provider. The host is started
(``start_async`` returns, and ``python -m funcstack.functions_host`` prints its ready line) only
once HTTP and every listener listen: a change made right after is delivered.

A host may serve one **function group** only, as an instance of a Flex Consumption app does
(per-function scaling: the HTTP functions are the group ``http``; each other function is
``function:<name>``; Azure's "Flex Consumption plan hosting" docs): its other functions are
indexed by the worker but not triggered there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from aiohttp import web

from funcstack._lazy import lazy_call
from funcstack.functions_host._bindings.plan import HostBindings, plan_bindings
from funcstack.functions_host._config import (
    HostJson,
    apply_settings,
    host_id,
    load_local_settings,
)
from funcstack.functions_host._console import set_levels as set_console_levels
from funcstack.functions_host._cors import CorsPolicy, load_cors
from funcstack.functions_host._cosmos_trigger.options import shared_leases
from funcstack.functions_host._functions import FunctionSpec, specs_from_metadata
from funcstack.functions_host._http_host import HttpHost
from funcstack.functions_host._http_server import HttpServer, KestrelLimits
from funcstack.functions_host._keys import FUNCTION_KEY_SETTING, MASTER_KEY_SETTING, HostKeys
from funcstack.functions_host._language_worker import LanguageWorker
from funcstack.functions_host._listener import HostServices, Listener
from funcstack.functions_host._python_version import python_version_notice
from funcstack.functions_host._sign_in import CORE_TOOLS_ENVIRONMENT, SignIn

#: Set on the worker: "true" when this host checks keys by auth level (``enforce_keys``).
KEYS_ENFORCED_ENVIRONMENT = "FUNCSTACK_KEYS_ENFORCED"

logger = logging.getLogger("funcstack.functions_host")

#: The function group of the HTTP functions (Flex Consumption's ``http``).
HTTP_GROUP = "http"

#: How long the host waits for its listeners before it says which it still waits for, and at
#: most: a listener neither listening nor failed by then (a hung connection, an endpoint
#: answering nothing, a Cosmos DB trigger's processor still taking its leases on a starved
#: machine) is named as not listening, and the host is ready without it, as Azure's host goes
#: on with a listener that could not start. Well within the 60 s the launcher gives a host to
#: be ready (worker start and indexing come first): a host waiting its triggers' 60 s failed
#: to start at a load average of 130, where it should have warned.
LISTEN_NOTICE_SECONDS = 5.0
LISTEN_TIMEOUT_SECONDS = 20.0

_HOST = "funcstack.functions_host"

#: The listener of each trigger type the host serves besides HTTP. Each trigger's module (and
#: the SDK it listens with) is imported when a function of its type is served: a host of an
#: app without Service Bus or queue triggers, or of the ``http`` group only, starts without
#: them (every host start paid about 0.2 s of CPU for them).
TRIGGERS: dict[str, Callable[[FunctionSpec, HostServices], Listener]] = {
    "cosmosDBTrigger": lazy_call(f"{_HOST}._cosmos_trigger.listener", "CosmosTriggerListener"),
    "timerTrigger": lazy_call(f"{_HOST}._timer_trigger", "TimerListener"),
    "serviceBusTrigger": lazy_call(f"{_HOST}._servicebus_trigger", "ServiceBusTriggerListener"),
    "queueTrigger": lazy_call(f"{_HOST}._queue_trigger", "QueueTriggerListener"),
    "blobTrigger": lazy_call(f"{_HOST}._blob_trigger", "BlobTriggerListener"),
}


def function_group(spec: FunctionSpec) -> str:
    """The Flex Consumption group a function scales with: ``http`` for HTTP triggers,
    ``function:<name>`` for any other."""
    return HTTP_GROUP if spec.trigger_type == "httpTrigger" else f"function:{spec.name}"


class Runner:
    """Starts the language worker, which indexes the app, and serves the app's functions.

    Use ``await start_async()`` / ``await stop_async()`` inside an event loop, or
    ``start()`` / ``stop()`` to run it on a background thread. Settings go into
    ``os.environ`` of THIS process (binding expressions resolve against them) and become the
    worker's environment, as the host does.

    ``enforce_keys``: HTTP functions require keys by their auth level, as in Azure (``keys``:
    the settings' ``FUNCTIONS_HOST_FUNCTION_KEY``/``FUNCTIONS_HOST_MASTER_KEY``, else new
    ones); by default no key is checked, as with ``func start``.

    ``group``: serve only the functions of that function group (``http`` or
    ``function:<name>``; ``function_group``); None serves them all.
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
        group: str | None = None,
    ) -> None:
        self.app_dir = Path(app_dir).resolve()
        self.group = group
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
        self._listeners: list[Listener] = []
        #: The triggers that could not start, by function: why (they keep trying).
        self.not_listening: dict[str, str] = {}
        self._opening: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._host_json = HostJson()
        self._cors: CorsPolicy | None = None
        self._sign_in: SignIn | None = None
        #: Set when the language worker's errors reached the host's threshold: the host stops
        #: itself to be recycled (``_language_worker``; ``python -m funcstack.functions_host``
        #: then exits with ``RECYCLE_EXIT``).
        self.recycle = asyncio.Event()

    def groups(self) -> dict[str, list[str]]:
        """The app's function groups (``function_group``) and their functions."""
        found: dict[str, list[str]] = {}
        for spec in self.functions:
            found.setdefault(function_group(spec), []).append(spec.name)
        return found

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
        set_console_levels(self._host_json.log_levels)  # the terminal's (funcstack run)
        notice = python_version_notice(self.app_dir, self.python)
        if notice is not None:
            logger.warning("%s", notice)
        # func start reads the `Host` section of the same file (CORS, CORSCredentials)
        self._cors = load_cors(self.settings_file)
        if self.enforce_keys:
            self.keys = HostKeys.from_settings()
        # the worker's environment only: this process may host other apps (tests do); the
        # keys are the host's (in Azure the app's environment holds none)
        environment = {
            k: v
            for k, v in os.environ.items()
            if k not in {FUNCTION_KEY_SETTING, MASTER_KEY_SETTING}
        }
        environment["PYTHON_SCRIPT_FILE_NAME"] = self.script
        # a local host, as Core Tools says to its host and workers (its Program.cs sets it at
        # start): an app can tell it runs without App Service's front end
        environment[CORE_TOOLS_ENVIRONMENT] = "true"
        # whether this host checks keys, the host's word (never a setting's): an app can tell a
        # key it was sent was checked (docs/functions-host.md, "Keys")
        environment[KEYS_ENFORCED_ENVIRONMENT] = "true" if self.enforce_keys else "false"
        # App Service Authentication's local stand-in, when the settings turn it on; its
        # WEBSITE_AUTH_ENABLED is the host's to set, never a setting's (SignIn.worker_environment)
        self._sign_in = SignIn.from_settings()
        SignIn.worker_environment(environment, on=self._sign_in is not None)
        self.worker = LanguageWorker(
            self.app_dir,
            environment,
            python=self.python,
            on_exhausted=lambda _why: self.recycle.set(),
        )
        metadata = await self.worker.start()
        self.functions = specs_from_metadata(metadata, self._host_json)
        # every binding served or refused now, as the host indexes them (_bindings.plan)
        self.worker.bindings = plan_bindings(
            self.functions, self._host_json, {"httpTrigger", *TRIGGERS}
        )
        # the bindings' clients made meanwhile (their SDKs imported in a thread): ready after
        self._opening = asyncio.create_task(self.worker.bindings.open(), name="binding-clients")
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
        served = self._served()
        await self._serve_http(worker, [s for s in served if s.trigger_type == "httpTrigger"])
        services = HostServices(
            worker,
            self._function_timeout,
            self._host_json,
            host_id(self.app_dir, self.group),
        )
        for spec in served:
            make = TRIGGERS.get(spec.trigger_type)
            if make is None:
                continue
            listener = make(spec, services)
            listener.start()
            self._listeners.append(listener)
        if self._opening is not None:
            await self._opening
        self.not_listening = await self._wait_listening()
        if self.not_listening:
            logger.warning(
                "host listening on %s (%d function(s)); not listening (each keeps trying, and "
                "says when it listens): %s",
                self.url,
                len(served),
                "; ".join(f"{name} ({why})" for name, why in self.not_listening.items()),
            )
        else:
            logger.info(
                "host listening on %s (%d function(s); every trigger listening)",
                self.url,
                len(served),
            )

    def _served(self) -> list[FunctionSpec]:
        """The functions this host serves (its group's; a group with none is refused), the
        ones watching a container with the same leases as another warned of, as in Azure."""
        served = [
            spec
            for spec in self.functions
            if self.group is None or function_group(spec) == self.group
        ]
        if self.group is not None:
            if not served:
                known = sorted({function_group(spec) for spec in self.functions})
                raise ValueError(
                    f"function group {self.group!r} has no function in this app "
                    f"(its groups: {', '.join(known) or 'none'})"
                )
            logger.info(
                "function group %s: %s", self.group, ", ".join(spec.name for spec in served)
            )
        served_names = {spec.name for spec in served}
        for first, second, opts in shared_leases(self.functions):
            if not {first, second} & served_names:
                continue  # said by the hosts of those functions (an http group's host: not)
            logger.warning(
                "functions %s and %s watch %s/%s with the same lease container %s and lease "
                "prefix '%s': as in Azure they compete for the same leases, and each receives "
                "only part of the changes, or none. Give one of them a lease_container_prefix "
                "of its own",
                first,
                second,
                opts.database_name,
                opts.container_name,
                opts.lease_container_name,
                opts.lease_container_prefix,
            )
        return served

    async def _serve_http(self, worker: LanguageWorker, http_specs: list[FunctionSpec]) -> None:
        """The HTTP functions served on the host's port (the port the OS chose kept)."""
        limits = KestrelLimits.from_settings()
        http_host = HttpHost(
            http_specs,
            self._host_json.route_prefix,
            worker,
            timeout=self._function_timeout,
            limits=limits,
            cors=self._cors,
            keys=self.keys,
            sign_in=self._sign_in,
            script_root=self.app_dir,
        )
        if self._sign_in is not None:
            logger.info(
                "sign-in: funcstack's stand-in for App Service Authentication at /.auth/login/aad"
            )
        if self.keys is not None:
            logger.info("keys: enforced by auth level (function key and master key)")
        if self._cors is not None:
            logger.info(
                "CORS: origins %s, credentials %s",
                ",".join(self._cors.origins),
                self._cors.credentials,
            )
        server = HttpServer(http_host.handle, limits=limits, access_log=None)
        # In-flight requests get half a second at a stop: a stack stops each part within 1.5 s.
        self._site_runner = web.ServerRunner(server, handle_signals=False, shutdown_timeout=0.5)
        await self._site_runner.setup()
        site = web.TCPSite(self._site_runner, self.host, self.port, reuse_address=True)
        await site.start()
        sockets = self._site_runner.addresses
        if sockets:
            self.port = int(sockets[0][1])

    async def _wait_listening(self) -> dict[str, str]:
        """Until every listener listens or has said why it cannot (by function: why); after
        ``LISTEN_NOTICE_SECONDS``, one line naming those still awaited; after
        ``LISTEN_TIMEOUT_SECONDS``, those are not listening (they keep trying)."""
        waits = {
            asyncio.ensure_future(listener.wait_listening()): listener
            for listener in self._listeners
        }
        if not waits:
            return {}
        try:
            _, pending = await asyncio.wait(waits, timeout=LISTEN_NOTICE_SECONDS)
            if pending:
                logger.warning(
                    "waiting for the trigger(s) of %s to listen; the host is ready once they do "
                    "(%g s at most)",
                    ", ".join(sorted(waits[task].spec.name for task in pending)),
                    LISTEN_TIMEOUT_SECONDS,
                )
                left = LISTEN_TIMEOUT_SECONDS - LISTEN_NOTICE_SECONDS
                _, pending = await asyncio.wait(pending, timeout=max(0.0, left))
        finally:
            for task in waits:
                task.cancel()
        late = f"not listening after {LISTEN_TIMEOUT_SECONDS:g} s (the lines above say why)"
        return {
            waits[task].spec.name: late if task in pending else str(task.result())
            for task in waits
            if task in pending or task.result() is not None
        }

    async def stop_async(self) -> None:
        """Stop accepting HTTP, stop the triggers (at once), stop the worker."""
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._opening
        if self._site_runner is not None:
            await self._site_runner.cleanup()
            self._site_runner = None
        # at once: each waits on its own clients (a Service Bus receiver's close, ~0.5 s)
        await asyncio.gather(*(listener.stop() for listener in self._listeners))
        self._listeners.clear()
        if self.worker is not None:
            await self.worker.stop()
            bindings = self.worker.bindings
            if isinstance(bindings, HostBindings):
                await bindings.close()
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
