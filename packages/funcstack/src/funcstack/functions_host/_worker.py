"""The language worker process: what the Azure Python 3.13 worker does around the library.

``python -m funcstack.functions_host._worker --host H --port P --worker-id W``

The Functions host starts one such process per app (with the app settings as environment
and the app folder as working directory). It connects back to the host, says
``StartStream``, and then answers the host's ``StreamingMessage``s by handing each request
to ``azure_functions_runtime`` -- worker init (which indexes the app), functions metadata,
function load, invocation -- exactly as the Azure worker does: the library gets
``request.request`` (the message) and ``request.properties`` (``host`` and ``protos``), and
its response goes back unchanged. Invocations run concurrently; sync functions run on the
library's thread pool.

The app's logging goes to stderr (the host's log). With ``--forward-logs`` (when the host shows
a terminal) each of its records goes to the host too, as an ``RpcLog`` of category User naming
the invocation it belongs to, as the Azure Python worker's dispatcher (``on_logging``) sends
them: the invocation is the library's ``invocation_id_cv`` on its thread pool (sync functions)
or the invocation's task (async ones).
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from funcstack._otel_setting import ENV_VAR as OTEL_ENV_VAR
from funcstack.functions_host import _forkserver
from funcstack.functions_host._rpc import frame, protos, read_message

logger = logging.getLogger("funcstack.functions_host._worker")


@dataclass
class LibraryRequest:
    """What the library's handlers take: the message and the worker's properties."""

    request: Any
    properties: dict[str, Any] = field(default_factory=dict)


#: The invocation an async function's task runs (the library sets its own only on threads).
_invocation: contextvars.ContextVar[str | None] = contextvars.ContextVar("invocation", default=None)

#: Loggers of the worker and its library: System logs, not the app's (not forwarded).
SYSTEM_LOGGERS = ("funcstack", "azure.functions", "azure_functions_runtime")


class Worker:
    def __init__(self, host: str, port: int, worker_id: str, *, forward_logs: bool = False) -> None:
        self._host = host
        self._port = port
        self._worker_id = worker_id
        self._forward_logs = forward_logs
        self._writer: asyncio.StreamWriter | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        import azure_functions_runtime as library

        reader, self._writer = await asyncio.open_connection(self._host, self._port)
        if self._forward_logs:
            forward = ForwardLogs(self._send, asyncio.get_running_loop())
            logging.getLogger().addHandler(forward)
        pb = protos()
        self._send(pb.StreamingMessage(start_stream=pb.StartStream(worker_id=self._worker_id)))
        handlers = {
            "worker_init_request": ("worker_init_response", library.worker_init_request),
            "functions_metadata_request": (
                "function_metadata_response",
                library.functions_metadata_request,
            ),
            "function_load_request": ("function_load_response", library.function_load_request),
            "invocation_request": ("invocation_response", library.invocation_request),
            "function_environment_reload_request": (
                "function_environment_reload_response",
                library.function_environment_reload_request,
            ),
        }
        while True:
            message = await read_message(reader)
            if message is None:
                break
            kind = message.WhichOneof("content")
            if kind == "worker_init_request":
                init = message.worker_init_request
                directory = init.function_app_directory
                if directory and directory not in sys.path:
                    sys.path.insert(0, directory)
                library.start_threadpool_executor()
            if kind == "worker_status_request":
                self._send(
                    pb.StreamingMessage(
                        request_id=message.request_id,
                        worker_status_response=pb.WorkerStatusResponse(),
                    )
                )
                continue
            if kind == "worker_terminate":
                break
            handler = handlers.get(kind or "")
            if handler is None:
                logger.warning("worker: ignoring %s", kind)
                continue
            task = asyncio.create_task(self._answer(message, *handler))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            if kind != "invocation_request":
                await task  # init, metadata and load are answered in order
        library.stop_threadpool_executor()

    async def _answer(self, message: Any, response_field: str, handler: Any) -> None:
        if message.WhichOneof("content") == "invocation_request":
            _invocation.set(message.invocation_request.invocation_id)  # this task's only
        pb = protos()
        request = LibraryRequest(message, {"host": self._host, "protos": pb})
        response = await handler(request)
        self._send(pb.StreamingMessage(request_id=message.request_id, **{response_field: response}))

    def _send(self, message: Any) -> None:
        assert self._writer is not None
        self._writer.write(frame(message))


class ForwardLogs(logging.Handler):
    """The app's log records to the host as ``RpcLog`` messages (category User), each naming
    its invocation; sent from the event loop's thread, in the order they were logged."""

    def __init__(self, send: Callable[[Any], None], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._send = send
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(SYSTEM_LOGGERS):
            return
        try:
            message = self._message(record)
            if threading.get_ident() == self._loop_thread:
                self._send(message)
            else:
                self._loop.call_soon_threadsafe(self._send, message)
        except RuntimeError:  # the loop has closed: the worker is ending
            return
        except Exception:
            self.handleError(record)

    @staticmethod
    def _message(record: logging.LogRecord) -> Any:
        from azure_functions_runtime import invocation_id_cv

        pb = protos()
        levels = pb.RpcLog.Level
        level = (
            levels.Critical
            if record.levelno >= logging.CRITICAL
            else levels.Error
            if record.levelno >= logging.ERROR
            else levels.Warning
            if record.levelno >= logging.WARNING
            else levels.Information
            if record.levelno >= logging.INFO
            else levels.Debug
        )
        log = pb.RpcLog(
            invocation_id=invocation_id_cv.get() or _invocation.get() or "",
            category=record.name,
            level=level,
            message=record.getMessage(),
            log_category=pb.RpcLog.User,
        )
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            log.exception.CopyFrom(
                pb.RpcException(
                    message=f"{type(error).__name__}: {error}",
                    stack_trace="".join(traceback.format_exception(error)).rstrip(),
                )
            )
        return pb.StreamingMessage(rpc_log=log)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m funcstack.functions_host._worker")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--host-pid", type=int, default=None)
    parser.add_argument(
        "--forward-logs",
        action="store_true",
        help="send the app's logging to the host as RpcLog messages too",
    )
    args = parser.parse_args(argv)
    if args.host_pid is not None and _forkserver.forked_for != args.host_pid:
        _die_with_the_host(args.host_pid)
    # else forked by the fork server for its host: the server (its parent, whose death sends
    # it SIGTERM) sends it SIGTERM when the host ends
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if os.environ.get("PYTHON_ENABLE_DEBUG_LOGGING") else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    # The library logs as "azure.functions" (one line per invocation at INFO): warnings only,
    # like the SDKs' HTTP logging.
    logging.getLogger("azure").setLevel(logging.WARNING)
    logging.getLogger().addFilter(drop_auth_level_advice)
    # Ctrl-C reaches the whole process group: the host decides when its worker stops
    # (WorkerTerminate, or the host's connection closing), so the worker flushes and exits
    # cleanly instead of dying mid-invocation with a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    shutdown_telemetry = _local_telemetry()
    try:
        asyncio.run(
            Worker(args.host, args.port, args.worker_id, forward_logs=args.forward_logs).run()
        )
    finally:
        shutdown_telemetry()
    _end_now()


def _end_now() -> None:
    """The worker has stopped as the host asked: its output flushed, the process ends now,
    without the interpreter's teardown, as the Azure host ends its worker after
    ``WorkerTerminate`` (``GrpcWorkerChannel.StopWorkerProcess``: the grace period, then the
    process is killed). The teardown would collect what the app never closed (the aiohttp
    session of an SDK client it caches) and log it at every stop, in the terminal too:
    ``Unclosed client session``, or, with modules half torn down, ``TypeError: 'NoneType'
    object is not iterable`` and ``sys.meta_path is None`` from their ``__del__``."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _die_with_the_host(host_pid: int) -> None:
    """A host that is killed (a stop that overran its grace, under load) must not leave its
    worker behind: the kernel ends the worker when the host process dies (Linux's
    PR_SET_PDEATHSIG; elsewhere the worker ends when the host's connection closes)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != host_pid:  # the host died before the line above
        os._exit(1)


#: What azure-functions' `FunctionApp.get_functions()` logs (on the root logger, at WARNING) on
#: every indexing of an app that has no HTTP function: advice that `http_auth_level` has no
#: effect there. It says nothing about the app and no setting silences it (the library checks
#: only whether an HTTP function exists), so the local worker drops that one message; Azure's
#: worker logs it.
AUTH_LEVEL_ADVICE = "Auth level is not applied to non http function app"


def drop_auth_level_advice(record: logging.LogRecord) -> bool:
    return not (record.name == "root" and str(record.msg).startswith(AUTH_LEVEL_ADVICE))


def _local_telemetry() -> Callable[[], None]:
    """What the Azure worker does with PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY (configure
    the exporters in the worker, before the app is indexed), done locally with file exporters
    when FUNCTIONS_HOST_OTEL_DIR is set (funcstack/otel.py; the service name from
    OTEL_SERVICE_NAME). Without it the app's opentelemetry-api calls stay no-ops."""
    directory = os.environ.get(OTEL_ENV_VAR)
    if not directory:
        return lambda: None
    from funcstack.otel import configure_file_exporters

    return configure_file_exporters(Path(directory))


if __name__ == "__main__":
    main()
