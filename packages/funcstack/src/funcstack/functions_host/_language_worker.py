"""The host's side of the language worker: start it, index the app through it, invoke.

As the Functions host does: it starts the worker process with the app settings as its
environment, sends ``WorkerInitRequest`` (the library indexes the app there),
``FunctionsMetadataRequest`` and one ``FunctionLoadRequest`` per function, then one
``InvocationRequest`` per invocation. An invocation that overruns the function timeout fails
and the worker is restarted (the host's answer to a timeout in an out-of-process language; not
counted as an error).

A worker that exits (a crash, a SIGKILL) is an error, and is started again at once, as the
host's ``RpcFunctionInvocationDispatcher`` does: one start at a time, at least
``RESTART_INTERVAL`` (10 s, the host's ``ProcessRestartInterval``) after the one before; an
invocation that comes meanwhile starts it at once. The errors are counted while each comes
within ``ERRORS_WINDOW`` (30 min, ``WorkerRestartErrorIntervalThresholdInMinutes``) of the one
before; at the ``ERRORS_THRESHOLD``-th (3, ``ErrorEventsThreshold``) the worker is not started
again: the host logs the host's words ("Exceeded language worker restart retry count ...") and
``on_exhausted`` stops it, so that whatever runs it starts it again (the platform recycles it;
funcstack's stacks restart it: ``_host_restarts``).

Each invocation ends with one ``Executed`` line (the host's ``FunctionExecutor``: function,
trigger, status, duration, a failure's error in full); the worker's ``RpcLog`` messages (the
app's logging, when the terminal wants it) are logged under the invocation's function, as the
host's ``WorkerChannel`` does (``_console.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from funcstack._cache import RPC_WHEEL_ENV, rpc_wheel
from funcstack.functions_host import _forkserver
from funcstack.functions_host._bindings.base import BindingError
from funcstack.functions_host._console import (
    console_active,
    log_invocation,
    log_printed,
    log_user,
)
from funcstack.functions_host._rpc import frame, protos, read_message
from funcstack.starts import record_start

logger = logging.getLogger("funcstack.functions_host")

_START_TIMEOUT_SECONDS = 60.0
#: The least time between two starts of a worker after errors (the host's
#: ``ProcessRestartInterval``).
RESTART_INTERVAL = 10.0
#: Errors counted while each comes within this many seconds of the one before (the host's
#: ``WorkerRestartErrorIntervalThresholdInMinutes``: 30).
ERRORS_WINDOW = 30 * 60.0
#: At this many errors the worker is not started again: the host recycles itself (the host's
#: ``ErrorEventsThreshold``: 3 per worker process).
ERRORS_THRESHOLD = 3


class WorkerError(RuntimeError):
    """The worker could not be started, or failed to index the app."""


class WorkerCrashedError(RuntimeError):
    """The worker process ended while an invocation was running."""


class FunctionTimeoutError(TimeoutError):
    """An invocation ran longer than the function timeout."""


class BindingsHook(Protocol):
    """The app's bindings around an invocation (``_bindings.plan.HostBindings``)."""

    async def before(
        self, function_id: str, input_data: list[Any], trigger_metadata: Mapping[str, Any]
    ) -> tuple[list[Any], Any]: ...

    async def after(self, function_id: str, answer: Any, data: Any) -> str | None: ...


class LanguageWorker:
    """One Python worker process for the app in ``app_dir``."""

    def __init__(
        self,
        app_dir: Path,
        environment: Mapping[str, str],
        *,
        python: str | None = None,
        on_exhausted: Callable[[str], None] | None = None,
    ) -> None:
        self.app_dir = app_dir
        #: Called once the worker's errors reached ``ERRORS_THRESHOLD`` (the module's
        #: docstring), with why: the host stops itself.
        self.on_exhausted = on_exhausted
        #: When each error counted came (``time.monotonic()``), and when the worker last started.
        self._errors: list[float] = []
        self._started_at = 0.0
        self._exhausted = False
        self._expected_exit = False  # a kill of the host's own: not an error
        self._recovering: asyncio.Task[None] | None = None
        #: The worker's interpreter (default: this one); it needs funcstack and the worker
        #: library installed, and the app's requirements.
        self.python = python or sys.executable
        self._environment = dict(environment)
        self._server: asyncio.Server | None = None
        self._process: asyncio.subprocess.Process | _forkserver.ForkedWorker | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._connected: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]] | None
        self._connected = None
        self._pending: dict[str, asyncio.Future[Any]] = {}
        self._request_ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self._stopping = False
        self.metadata: list[Any] = []
        self.starts = 0
        #: function id -> (name, trigger type), from the metadata
        self._functions: dict[str, tuple[str, str]] = {}
        #: invocation id -> function name, while it runs (the RpcLog messages name the id)
        self._running: dict[str, str] = {}
        self._printed: asyncio.Task[None] | None = None
        #: The app's bindings, run around each invocation (set by the runner once indexed).
        self.bindings: BindingsHook | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> list[Any]:
        """Start the process, initialise it (indexing) and load every function."""
        async with self._lock:
            await self._start_locked()
        return self.metadata

    async def _start_locked(self) -> None:
        loop = asyncio.get_running_loop()
        self._connected = loop.create_future()
        self._server = await asyncio.start_server(self._on_connect, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        env = dict(self._environment)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.setdefault(RPC_WHEEL_ENV, str(rpc_wheel()))
        worker_id = str(uuid.uuid4())
        # the app's logging as RpcLog messages, when a terminal shows it (else the log, which
        # has it from the worker's stderr, is all there is to show)
        console = console_active()
        args = [
            "--host", "127.0.0.1", "--port", str(port), "--worker-id", worker_id,
            "--host-pid", str(os.getpid()), *(["--forward-logs"] if console else []),
        ]  # fmt: skip
        # forked from the fork server that forked this host, where it can be (this
        # interpreter's); else an interpreter of its own
        self._process = None
        if self.python == sys.executable:
            self._process = await _forkserver.spawn_worker(
                args, env=env, cwd=str(self.app_dir), pipe_stdout=console
            )
        if self._process is None:
            self._process = await asyncio.create_subprocess_exec(
                self.python, "-m", _forkserver.WORKER_MODULE, *args,
                cwd=str(self.app_dir), env=env, stdin=asyncio.subprocess.DEVNULL,
                # what the app prints: the host's stdout, else read line by line for the
                # terminal
                stdout=asyncio.subprocess.PIPE if console else None,
            )  # fmt: skip
        record_start("worker", self._process.pid, identity=f"host {os.getpid()}")
        self._started_at = time.monotonic()
        self._expected_exit = False
        if self._process.stdout is not None:
            self._printed = asyncio.create_task(
                _relay_printed(self._process.stdout), name="worker-stdout"
            )
        self.starts += 1
        try:
            reader, self._writer = await asyncio.wait_for(
                asyncio.shield(self._connected), _START_TIMEOUT_SECONDS
            )
        except TimeoutError:
            await self._kill_locked()
            raise WorkerError("the language worker did not connect in time") from None
        first = await read_message(reader)
        if first is None or first.WhichOneof("content") != "start_stream":
            await self._kill_locked()
            raise WorkerError("the language worker did not start its stream")
        self._reader_task = asyncio.create_task(self._read(reader), name="worker-reader")
        pb = protos()
        init = await self._request(
            "worker_init_request",
            pb.WorkerInitRequest(
                host_version="4.0.0-local",
                function_app_directory=str(self.app_dir),
                worker_directory=str(Path(__file__).parent),
            ),
        )
        _check(init.worker_init_response.result, "worker init (indexing)")
        listing = await self._request(
            "functions_metadata_request",
            pb.FunctionsMetadataRequest(function_app_directory=str(self.app_dir)),
        )
        response = listing.function_metadata_response
        _check(response.result, "functions metadata")
        self.metadata = list(response.function_metadata_results)
        self._functions = {
            str(m.function_id): (str(m.name), _trigger_type(m)) for m in self.metadata
        }
        for metadata in self.metadata:
            loaded = await self._request(
                "function_load_request",
                pb.FunctionLoadRequest(function_id=metadata.function_id, metadata=metadata),
            )
            _check(loaded.function_load_response.result, f"function load of {metadata.name}")

    async def stop(self) -> None:
        self._stopping = True
        recovering = self._recovering
        if recovering is not None and not recovering.done():
            recovering.cancel()
            with contextlib.suppress(BaseException):
                await recovering
        async with self._lock:
            if self._writer is not None and self._process and self._process.returncode is None:
                with contextlib.suppress(Exception):
                    self._writer.write(
                        frame(
                            protos().StreamingMessage(worker_terminate=protos().WorkerTerminate())
                        )
                    )
                    await self._writer.drain()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._process.wait(), 2.0)
            await self._kill_locked()

    async def restart(self, reason: str) -> None:
        """Kill the worker and start a new one (in-flight invocations fail)."""
        async with self._lock:
            if self._stopping:
                return
            logger.error("restarting the language worker: %s", reason)
            await self._kill_locked()
            await self._start_locked()

    async def _kill_locked(self) -> None:
        self._expected_exit = True
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        if self._printed is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._printed, 2.0)  # its last lines, up to the end
            self._printed = None
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task
            self._reader_task = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._server is not None:
            self._server.close()
            self._server = None
        self._fail_pending(WorkerCrashedError("the language worker was stopped"))

    # -- messages ----------------------------------------------------------------------------

    async def try_invoke(
        self, function_id: str, input_data: list[Any], **kwargs: Any
    ) -> str | None:
        """``invoke``, as a trigger sees it: None when the function succeeded, else why it
        failed (the worker's exception message, or the host-side error: timeout, crash)."""
        try:
            answer = await self.invoke(function_id, input_data, **kwargs)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        if answer.result.status == protos().StatusResult.Success:
            return None
        return str(answer.result.exception.message).strip() or "failed"

    async def invoke(
        self,
        function_id: str,
        input_data: list[Any],
        *,
        trigger_metadata: Mapping[str, Any] | None = None,
        trace_parent: str = "",
        trace_state: str = "",
        retry_count: int = 0,
        max_retry_count: int = 0,
        time_limit: float | None = None,
        detail: str = "",
    ) -> Any:
        """Send one ``InvocationRequest``; the worker's ``InvocationResponse``. Logs the
        invocation's ``Executed`` line (``detail``: what the trigger adds, e.g. the HTTP
        request's method and path)."""
        started = time.perf_counter()
        invocation_id = str(uuid.uuid4())
        name, trigger = self._functions.get(function_id, (function_id, ""))
        self._running[invocation_id] = name
        try:
            answer = await self._invoke_bound(
                invocation_id,
                function_id,
                input_data,
                trigger_metadata=trigger_metadata,
                trace_parent=trace_parent,
                trace_state=trace_state,
                retry_count=retry_count,
                max_retry_count=max_retry_count,
                time_limit=time_limit,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log_invocation(
                name, trigger, started=started, detail=detail, error=f"{type(exc).__name__}: {exc}"
            )
            raise
        finally:
            self._running.pop(invocation_id, None)
        result = answer.result
        if result.status == protos().StatusResult.Success:
            status = _http_status(answer)
            log_invocation(
                name,
                trigger,
                started=started,
                detail=f"{detail} -> {status}" if detail and status else detail,
            )
        else:
            failure = result.exception
            log_invocation(
                name,
                trigger,
                started=started,
                detail=detail,
                error="\n".join(
                    part
                    for part in (str(failure.message).strip(), str(failure.stack_trace).rstrip())
                    if part
                )
                or "failed",
            )
        return answer

    async def _invoke_bound(
        self,
        invocation_id: str,
        function_id: str,
        input_data: list[Any],
        *,
        trigger_metadata: Mapping[str, Any] | None,
        **kwargs: Any,
    ) -> Any:
        """``_invoke`` with the function's bindings around it (``bindings``): its inputs read
        first, its outputs written once it succeeded; a binding that fails makes the answer a
        failure with the binding's message."""
        bindings = self.bindings
        if bindings is None:
            return await self._invoke(
                invocation_id, function_id, input_data, trigger_metadata=trigger_metadata, **kwargs
            )
        try:
            extra, data = await bindings.before(function_id, input_data, trigger_metadata or {})
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return _failed(invocation_id, _binding_message(exc))
        answer = await self._invoke(
            invocation_id,
            function_id,
            [*input_data, *extra],
            trigger_metadata=trigger_metadata,
            **kwargs,
        )
        if answer.result.status != protos().StatusResult.Success:
            return answer
        try:
            error = await bindings.after(function_id, answer, data)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = _binding_message(exc)
        return answer if error is None else _failed(invocation_id, error)

    async def _invoke(
        self,
        invocation_id: str,
        function_id: str,
        input_data: list[Any],
        *,
        trigger_metadata: Mapping[str, Any] | None,
        trace_parent: str,
        trace_state: str,
        retry_count: int,
        max_retry_count: int,
        time_limit: float | None,
    ) -> Any:
        pb = protos()
        request = pb.InvocationRequest(
            invocation_id=invocation_id,
            function_id=function_id,
            input_data=input_data,
            trigger_metadata=dict(trigger_metadata or {}),
            trace_context=pb.RpcTraceContext(trace_parent=trace_parent, trace_state=trace_state),
            retry_context=pb.RetryContext(retry_count=retry_count, max_retry_count=max_retry_count),
        )
        if self._writer is None:
            async with self._lock:
                if self._exhausted:
                    raise WorkerCrashedError("the language worker is not started again")
                if self._writer is None and not self._stopping:
                    await self._start_locked()
        future = asyncio.get_running_loop().create_future()
        self._pending[invocation_id] = future
        try:
            self._send(pb.StreamingMessage(invocation_request=request))
            if time_limit is None:
                message = await future
            else:
                try:
                    message = await asyncio.wait_for(asyncio.shield(future), time_limit)
                except TimeoutError:
                    logger.error(
                        "Timeout value of %.0fs exceeded by function invocation %s",
                        time_limit,
                        invocation_id,
                    )
                    asyncio.get_running_loop().create_task(
                        self.restart("function timeout exceeded")
                    )
                    raise FunctionTimeoutError(f"over the {time_limit}s function timeout") from None
        finally:
            self._pending.pop(invocation_id, None)
        return message.invocation_response

    async def _request(self, field_name: str, payload: Any) -> Any:
        request_id = f"host-{next(self._request_ids)}"
        future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            self._send(protos().StreamingMessage(request_id=request_id, **{field_name: payload}))
            return await asyncio.wait_for(future, _START_TIMEOUT_SECONDS)
        finally:
            self._pending.pop(request_id, None)

    def _send(self, message: Any) -> None:
        if self._writer is None:
            raise WorkerCrashedError("the language worker is not running")
        self._writer.write(frame(message))

    def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._connected is not None and not self._connected.done():
            self._connected.set_result((reader, writer))
        else:
            writer.close()

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while True:
            message = await read_message(reader)
            if message is None:
                break
            kind = message.WhichOneof("content")
            if kind == "invocation_response":
                key = message.invocation_response.invocation_id
            elif kind == "rpc_log":
                log = message.rpc_log
                if log.log_category == protos().RpcLog.User:
                    log_user(self._running.get(str(log.invocation_id)), log)
                continue
            else:
                key = message.request_id
            future = self._pending.get(key)
            if future is not None and not future.done():
                future.set_result(message)
        self._writer = None
        self._fail_pending(WorkerCrashedError("the language worker exited"))
        if not self._stopping and not self._expected_exit:
            self._recovering = asyncio.create_task(self._recover(), name="worker-restart")

    async def _recover(self) -> None:
        """The worker exited (the module's docstring): counted, and started again, or, at the
        threshold, not: ``on_exhausted``."""
        while not self._stopping:
            now = time.monotonic()
            if self._errors and now - self._errors[-1] > ERRORS_WINDOW:
                self._errors.clear()
            self._errors.append(now)
            if len(self._errors) >= ERRORS_THRESHOLD:
                self._exhausted = True
                why = (
                    f"the language worker exited {len(self._errors)} times within "
                    f"{ERRORS_WINDOW / 60:g} minutes of each other"
                )
                logger.error(
                    "Exceeded language worker restart retry count for runtime:python (%s). "
                    "Shutting down and proactively recycling the Functions Host to recover",
                    why,
                )
                if self.on_exhausted is not None:
                    self.on_exhausted(why)
                return
            wait = self._started_at + RESTART_INTERVAL - time.monotonic()
            logger.error(
                "the language worker exited (error %d of %d); starting it again%s",
                len(self._errors),
                ERRORS_THRESHOLD,
                f" in {wait:.1f} s" if wait > 0 else "",
            )
            if wait > 0:
                await asyncio.sleep(wait)
            async with self._lock:
                if self._stopping or self._exhausted or self._writer is not None:
                    return  # stopped, recycling, or started by an invocation meanwhile
                try:
                    await self._start_locked()
                except (WorkerError, OSError, TimeoutError) as exc:
                    logger.error("the language worker did not start again: %s", exc)
                    await self._kill_locked()
                    continue  # another error
            logger.info("the language worker started again (pid %s)", self._pid())
            return

    def _pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _fail_pending(self, error: BaseException) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()


async def _relay_printed(stdout: asyncio.StreamReader) -> None:
    """Each line the worker prints, to the host's log and terminal, until it ends (a line over
    64 KiB in pieces of that size: the pipe never fills)."""
    pending = b""
    while chunk := await stdout.read(_PRINTED_LINE):
        *lines, pending = (pending + chunk).split(b"\n")
        if len(pending) >= _PRINTED_LINE:
            lines.append(pending)
            pending = b""
        for line in lines:
            log_printed(line.decode("utf-8", "replace").rstrip("\r"))
    if pending:
        log_printed(pending.decode("utf-8", "replace").rstrip("\r"))


_PRINTED_LINE = 64 * 1024


def _binding_message(error: BaseException) -> str:
    return str(error) if isinstance(error, BindingError) else f"{type(error).__name__}: {error}"


def _failed(invocation_id: str, message: str) -> Any:
    """A failed ``InvocationResponse`` for a binding's failure (the host's
    ``FunctionInvocationException``)."""
    pb = protos()
    return pb.InvocationResponse(
        invocation_id=invocation_id,
        result=pb.StatusResult(
            status=pb.StatusResult.Failure, exception=pb.RpcException(message=message)
        ),
    )


def _trigger_type(metadata: Any) -> str:
    """The type of a function's trigger binding, from its metadata's raw bindings."""
    for raw in metadata.raw_bindings:
        try:
            binding = json.loads(raw)
        except ValueError:
            continue
        kind = str(binding.get("type", "")) if isinstance(binding, dict) else ""
        if kind.endswith("Trigger"):
            return kind
    return ""


def _http_status(answer: Any) -> str:
    """The status of an HTTP function's answer (its return value's, or a named HTTP output's;
    200 when it sets none), else ''."""
    for value in (answer.return_value, *(b.data for b in answer.output_data)):
        if value.WhichOneof("data") == "http":
            return str(value.http.status_code or "200")
    return ""


def _check(result: Any, what: str) -> None:
    if result.status != protos().StatusResult.Success:
        message = result.exception.message or "unknown error"
        raise WorkerError(f"{what} failed: {message}")
