"""What the host shows in a terminal, as ``func start`` shows it: one line per invocation (the
function, its trigger, how it ended, how long it took; a failure's error in full), the app's own
logging (which the worker sends to the host as ``RpcLog`` messages, category User, as the Azure
Python worker does), what the app prints (the worker's stdout, read by the host), and the
host's warnings and errors.

Categories as the Azure host names them (``LogCategories``): ``Function.<name>`` for the line
per invocation, ``Function.<name>.User`` for what the app logs during an invocation; filtered
by host.json ``logging.logLevel`` as .NET's ``LoggerFilterOptions`` does (the longest matching
category prefix, ignoring case, else ``default``, else Information).

The lines go to the host's log like any other (the app's own records are already there: the
worker writes them to its stderr, which is the host's), and, when the host runs with
``--console``, to its stdout as JSON lines ``{"console": {"time", "level", "category",
"message"}}``, which ``start_runner(on_console=...)`` hands to its caller (``funcstack run``
prints them; ``render``).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import IO, Any

from funcstack.functions_host._host_json import LOG_LEVELS

__all__ = [
    "APP_RECORD",
    "CONSOLE_ONLY",
    "ConsoleHandler",
    "LogLevels",
    "install_console",
    "log_invocation",
    "log_printed",
    "log_user",
    "not_console_only",
    "render",
    "set_levels",
]

#: A record's attribute: the record is for the terminal only (the log has it already).
CONSOLE_ONLY = "funcstack_console_only"
#: A record's attribute: the app's (its logging, its prints), shown by its category's level.
APP_RECORD = "funcstack_app_record"

#: RpcLog.Level's numbers (Trace, Debug, Information, Warning, Error, Critical, None).
_RPC_LEVELS = (
    5,
    logging.DEBUG,
    logging.INFO,
    logging.WARNING,
    logging.ERROR,
    logging.CRITICAL,
    logging.CRITICAL + 10,
)


class LogLevels:
    """host.json ``logging.logLevel``: the minimum level of a category."""

    def __init__(self, rules: Mapping[str, str] | None = None) -> None:
        self.default = logging.INFO
        found: list[tuple[str, int]] = []
        for category, name in (rules or {}).items():
            level = LOG_LEVELS.get(str(name).strip().lower())
            if level is None:  # HostJson.load refuses it
                continue
            if category.strip().lower() == "default":
                self.default = level
            else:
                found.append((category.strip().casefold(), level))
        self._rules = sorted(found, key=lambda rule: len(rule[0]), reverse=True)

    def minimum(self, category: str) -> int:
        folded = category.casefold()
        for prefix, level in self._rules:
            if folded.startswith(prefix):
                return level
        return self.default


class ConsoleHandler(logging.Handler):
    """The terminal's records, as JSON lines on ``stream``: every ``Function.*`` record and
    every record the worker forwarded, at or above its category's level, and the host's own
    warnings and errors."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        super().__init__()
        self.stream = stream or sys.stdout
        self.levels = LogLevels()

    def wanted(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("Function.") or getattr(record, APP_RECORD, False):
            return record.levelno >= self.levels.minimum(record.name)
        return record.levelno >= logging.WARNING

    def emit(self, record: logging.LogRecord) -> None:
        if not self.wanted(record):
            return
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + logging.Formatter().formatException(record.exc_info)
            stamp = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
            line = {
                "console": {
                    "time": stamp.replace("+00:00", "Z"),
                    "level": record.levelname,
                    "category": record.name,
                    "message": message,
                }
            }
            self.stream.write(json.dumps(line) + "\n")
            self.stream.flush()
        except Exception:
            self.handleError(record)


_handlers: list[ConsoleHandler] = []


def install_console(stream: IO[str] | None = None) -> ConsoleHandler:
    """Send the terminal's records to ``stream`` (stdout) as JSON lines, from now on; the
    language worker started after this forwards the app's logging (``console_active``)."""
    handler = ConsoleHandler(stream)
    logging.getLogger().addHandler(handler)
    _handlers.append(handler)
    return handler


def console_active() -> bool:
    return bool(_handlers)


def set_levels(rules: Mapping[str, str] | None) -> None:
    """host.json ``logging.logLevel`` for the terminal's records."""
    if _handlers:
        levels = LogLevels(rules)
        for handler in _handlers:
            handler.levels = levels


def not_console_only(record: logging.LogRecord) -> bool:
    """A filter for the log's handler: the records it already has stay out."""
    return not getattr(record, CONSOLE_ONLY, False)


def log_invocation(
    function: str, trigger: str, *, started: float, detail: str = "", error: str | None = None
) -> None:
    """The line per invocation, ``Executed 'Functions.<name>' (<status>, <trigger>[, <detail>],
    Duration=<ms>ms)`` as ``func start`` words it, then a failure's error in full; ``started``
    is the ``time.perf_counter()`` of the invocation's start."""
    duration = (time.perf_counter() - started) * 1000.0
    status = "Succeeded" if error is None else "Failed"
    what = ", ".join(
        part for part in (status, trigger, detail, f"Duration={duration:.0f}ms") if part
    )
    log = logging.getLogger(f"Function.{function}")
    text = f"Executed 'Functions.{function}' ({what})"
    if error is None:
        log.info("%s", text)
    else:
        log.error("%s\n%s", text, error.rstrip())


def log_user(function: str | None, rpc_log: Any) -> None:
    """An ``RpcLog`` of the app's (category User) as the host logs it: category
    ``Function.<name>.User`` during an invocation, else the app's own logger's name; for the
    terminal only (the worker wrote it to the log already)."""
    category = f"Function.{function}.User" if function else f"Worker.{rpc_log.category or 'root'}"
    number = int(rpc_log.level)
    level = _RPC_LEVELS[number] if 0 <= number < len(_RPC_LEVELS) else logging.INFO
    message = str(rpc_log.message)
    if rpc_log.HasField("exception"):
        failure = rpc_log.exception
        message = "\n".join(
            part
            for part in (message, str(failure.message), str(failure.stack_trace).rstrip())
            if part
        )
    logging.getLogger(category).log(
        level, "%s", message, extra={CONSOLE_ONLY: True, APP_RECORD: True}
    )


def log_printed(line: str) -> None:
    """A line the app printed (the worker's stdout, which the host reads when a terminal shows
    it, as the Azure host reads its workers' output): in the log and the terminal."""
    logging.getLogger("Worker.stdout").info("%s", line, extra={APP_RECORD: True})


def render(entry: Mapping[str, Any], app: str) -> str:
    """A console record as a terminal line (and its continuation lines, indented):
    ``[14:03:07.412] app: message``, the level before the message from warnings up."""
    stamp = str(entry.get("time") or "")
    try:
        clock = datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone()
        shown = clock.strftime("%H:%M:%S.") + f"{clock.microsecond // 1000:03d}"
    except ValueError:
        shown = stamp
    level = str(entry.get("level") or "INFO")
    lines = str(entry.get("message") or "").splitlines() or [""]
    head = (
        f"[{shown}] {app}: "
        + (f"{level} " if level in {"WARNING", "ERROR", "CRITICAL"} else "")
        + lines[0]
    )
    return "\n".join([head, *(f"    {line}" for line in lines[1:])])
